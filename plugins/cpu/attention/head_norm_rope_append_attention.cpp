// head_norm_rope_append_attention on the host (contract:
// ninfer/abi/ops/head_norm_rope_append_attention.h): the launches of head_norm_rope, kv_append
// and attention one after the other, so the result is bit for bit that of the ops.
#include "common/cpu_ops.hpp"
#include "common/host_variant.hpp"
#include "ninfer/abi/ops/head_norm_rope_append_attention.h"

namespace ninfer::cpu_plugin {
namespace {

// attention's shapes; the rope's (rotary_dim) are checked by its launch.
int32_t supports(const void*, const ninfer_shape* s) { return attention_supports(nullptr, s); }

int32_t launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  const auto& a = *static_cast<const ninfer_head_norm_rope_append_attention_args*>(args);
  if (const char* why = ninfer_head_norm_rope_append_attention_untied(&a))
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "%s", why);
  const ninfer_token_batch& b = a.attn.batch;
  for (int64_t t = l->token_begin; t < l->token_end; ++t) {
    const int32_t i = b.token_seq[t];
    if (b.seq_start[i + 1] - b.seq_start[i] != 1)
      return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                  "sequence %d has %d tokens in this call; the op takes decode steps (one token per sequence)", i,
                  b.seq_start[i + 1] - b.seq_start[i]);
  }
  if (int32_t rc = head_norm_rope_launch(nullptr, &a.prep.rope, l, stream, err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = kv_append_launch(nullptr, &a.prep.append, l, stream, err, err_len); rc != NINFER_OK) return rc;
  return attention_launch(nullptr, &a.attn, l, stream, err, err_len);
}

} // namespace

int32_t register_head_norm_rope_append_attention(const ninfer_registrar* r) {
  static const ninfer_variant v =
      host_variant(NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION, "reference", kKvCacheDtypesAll, supports, launch);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
