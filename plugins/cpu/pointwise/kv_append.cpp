// kv_append on the host (contract: ninfer/abi/ops/kv_append.h): float32 rows into a float32,
// float16 or bfloat16 cache, rounded to nearest even on the way in.
#include <cstring>

#include "common/cpu_ops.hpp"
#include "common/host_variant.hpp"
#include "ninfer/abi/ops/kv_append.h"
#include "common/numerics.hpp"

namespace ninfer::cpu_plugin {
namespace {

int32_t supports(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0; }

template <class E>
void store_row(void* cache, int64_t at, const float* src, int64_t n) {
  auto* dst = static_cast<typename E::T*>(cache) + at;
  for (int64_t i = 0; i < n; ++i) dst[i] = E::store(src[i]);
}

template <class E>
int32_t append(const ninfer_kv_append_args& a, const ninfer_launch* l, char* err, size_t err_len) {
  const auto& c = a.cache;
  const int64_t row = static_cast<int64_t>(c.kv_heads) * c.head_dim;
  if (const char* why = ninfer_kv_cache_layout_error(&c)) return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "%s", why);
  for (int64_t t = l->token_begin; t < l->token_end; ++t) {
    const int32_t slot = a.batch.seq_slot[a.batch.token_seq[t]];
    const int32_t pos = a.batch.token_pos[t];
    if (slot < 0 || slot >= c.slots || pos < 0 || pos >= c.capacity)
      return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                  "token %lld: slot %d position %d outside the cache (%d slots x %d positions)",
                  static_cast<long long>(t), slot, pos, c.slots, c.capacity);
    const int64_t at = ninfer_kv_cache_row(&c, slot, pos);
    if (at < 0)
      return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "token %lld: slot %d block %d names no block of the pool (%d blocks)",
                  static_cast<long long>(t), slot, pos / c.block_tokens, c.pool_blocks);
    store_row<E>(c.k, at, a.k + t * a.k_token_stride, row);
    store_row<E>(c.v, at, a.v + t * a.v_token_stride, row);
  }
  return NINFER_OK;
}

} // namespace

int32_t kv_append_launch(const void*, const void* args, const ninfer_launch* l, void*, char* err, size_t err_len) {
  const auto& a = *static_cast<const ninfer_kv_append_args*>(args);
  switch (a.cache.dtype) {
    case NINFER_DTYPE_F32: return append<KvF32>(a, l, err, err_len);
    case NINFER_DTYPE_F16: return append<KvF16>(a, l, err, err_len);
    case NINFER_DTYPE_BF16: return append<KvBf16>(a, l, err, err_len);
  }
  return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "cache dtype %d is not F32, F16 or BF16", a.cache.dtype);
}

int32_t register_kv_append(const ninfer_registrar* r) {
  static const ninfer_variant v =
      host_variant(NINFER_OP_KV_APPEND, "reference", kKvCacheDtypes, supports, kv_append_launch);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
