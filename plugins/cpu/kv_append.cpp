// kv_append on the host (contract: ninfer/abi/ops/kv_append.h).
#include <cstring>

#include "cpu_ops.hpp"
#include "host_variant.hpp"
#include "ninfer/abi/ops/kv_append.h"

namespace ninfer::cpu_plugin {
namespace {

int32_t supports(const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0; }

int32_t launch(const void* args, const ninfer_launch* l, void*, char* err, size_t err_len) {
  const auto& a = *static_cast<const ninfer_kv_append_args*>(args);
  const auto& c = a.cache;
  const int64_t row = static_cast<int64_t>(c.kv_heads) * c.head_dim;
  for (int64_t t = l->token_begin; t < l->token_end; ++t) {
    const int32_t slot = a.batch.seq_slot[a.batch.token_seq[t]];
    const int32_t pos = a.batch.token_pos[t];
    if (slot < 0 || slot >= c.slots || pos < 0 || pos >= c.capacity)
      return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                  "token %lld: slot %d position %d outside the cache (%d slots x %d positions)",
                  static_cast<long long>(t), slot, pos, c.slots, c.capacity);
    const int64_t at = (static_cast<int64_t>(slot) * c.capacity + pos) * row;
    std::memcpy(c.k + at, a.k + t * a.k_token_stride, sizeof(float) * row);
    std::memcpy(c.v + at, a.v + t * a.v_token_stride, sizeof(float) * row);
  }
  return NINFER_OK;
}

} // namespace

int32_t register_kv_append(const ninfer_registrar* r) {
  static const ninfer_variant v = host_variant(NINFER_OP_KV_APPEND, "reference", kF32Only, supports, launch);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
