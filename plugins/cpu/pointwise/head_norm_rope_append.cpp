// head_norm_rope_append on the host (contract: ninfer/abi/ops/head_norm_rope_append.h): the
// launches of head_norm_rope and kv_append one after the other, so the result is bit for bit
// that of the two ops.
#include "common/cpu_ops.hpp"
#include "common/host_variant.hpp"
#include "ninfer/abi/ops/head_norm_rope_append.h"

namespace ninfer::cpu_plugin {
namespace {

// head_norm_rope's shapes with at least one k (and so one v) head.
int32_t supports(const void*, const ninfer_shape* s) {
  return s->dims[2] > 0 && head_norm_rope_supports(nullptr, s) && ninfer_kv_dtype_takes_head_dim(s->dtype, s->dims[0]);
}

int32_t launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  const auto& a = *static_cast<const ninfer_head_norm_rope_append_args*>(args);
  if (const char* why = ninfer_head_norm_rope_append_untied(&a))
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "%s", why);
  if (int32_t rc = head_norm_rope_launch(nullptr, &a.rope, l, stream, err, err_len); rc != NINFER_OK) return rc;
  return kv_append_launch(nullptr, &a.append, l, stream, err, err_len);
}

} // namespace

int32_t register_head_norm_rope_append(const ninfer_registrar* r) {
  static const ninfer_variant v =
      host_variant(NINFER_OP_HEAD_NORM_ROPE_APPEND, "reference", kKvCacheDtypesAll, supports, launch);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
