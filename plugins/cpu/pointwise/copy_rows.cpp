// copy_rows on the host (contract: ninfer/abi/ops/copy_rows.h): each row's words copied as bits,
// group by group.
#include <cstring>

#include "common/cpu_ops.hpp"
#include "common/host_variant.hpp"
#include "ninfer/abi/ops/copy_rows.h"

namespace ninfer::cpu_plugin {
namespace {

int32_t supports(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0; }

int32_t launch(const void*, const void* args, const ninfer_launch* l, void*, char* err, size_t err_len) {
  const auto& a = *static_cast<const ninfer_copy_rows_args*>(args);
  if (a.dst_stride < a.width || a.src_stride < a.width)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "copy_rows: strides %lld, %lld below the width %lld",
                static_cast<long long>(a.dst_stride), static_cast<long long>(a.src_stride),
                static_cast<long long>(a.width));
  const int64_t groups = a.groups > 1 ? a.groups : 1;
  if (groups > 1 && (!a.dst_groups || !a.src_groups))
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "copy_rows: %lld groups without both group arrays",
                static_cast<long long>(groups));
  for (int64_t g = 0; g < groups; ++g) {
    auto* dst = static_cast<uint32_t*>(groups > 1 ? a.dst_groups[g] : a.dst);
    const auto* src = static_cast<const uint32_t*>(groups > 1 ? a.src_groups[g] : a.src);
    for (int64_t r = l->token_begin; r < l->token_end; ++r) {
      const int64_t d = a.dst_index ? a.dst_index[r] : r, s = a.src_index ? a.src_index[r] : r;
      if (d < 0 || s < 0)
        return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                    "copy_rows: row %lld names row %lld of dst, %lld of src", static_cast<long long>(r),
                    static_cast<long long>(d), static_cast<long long>(s));
      std::memcpy(dst + d * a.dst_stride, src + s * a.src_stride, sizeof(uint32_t) * static_cast<size_t>(a.width));
    }
  }
  return NINFER_OK;
}

} // namespace

int32_t register_copy_rows(const ninfer_registrar* r) {
  static const ninfer_variant v = host_variant(NINFER_OP_COPY_ROWS, "reference", kF32Only, supports, launch);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
