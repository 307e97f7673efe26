// l2_norm on the host (contract: ninfer/abi/ops/l2_norm.h), in place over each head's row. The
// sum of squares accumulates in double.
#include <cmath>

#include "common/cpu_ops.hpp"
#include "common/host_variant.hpp"
#include "ninfer/abi/ops/l2_norm.h"
#include "common/numerics.hpp"
#include "common/row_math.hpp"

namespace ninfer::cpu_plugin {
namespace {

int32_t supports_rows(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0; }

} // namespace

void l2_norm_row(float* x, int32_t dim, float eps) {
  const double inv = 1.0 / std::sqrt(sum_squares(x, dim) + eps);
  for (int32_t i = 0; i < dim; ++i) x[i] = static_cast<float>(x[i] * inv);
}

namespace {

int32_t l2_norm(const void*, const void* args, const ninfer_launch* l, void*, char*, size_t) {
  const auto& a = *static_cast<const ninfer_l2_norm_args*>(args);
  for (int64_t t = l->token_begin; t < l->token_end; ++t) {
    for (int32_t h = 0; h < a.heads; ++h) l2_norm_row(a.x + t * a.token_stride + h * a.head_stride, a.dim, a.eps);
  }
  return NINFER_OK;
}

} // namespace

int32_t register_l2_norm(const ninfer_registrar* r) {
  static const ninfer_variant v = host_variant(NINFER_OP_L2_NORM, "reference", kF32Only, supports_rows, l2_norm);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
