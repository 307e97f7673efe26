// rms_norm on the host (contract: ninfer/abi/ops/rms_norm.h): plain and (1+w) weights, an
// optional fused residual add, per-head rows with strides. The sum of squares accumulates in
// double; every output element is computed from the row's values read before any is written,
// so in-place calls are safe.
#include <cmath>

#include "common/cpu_ops.hpp"
#include "common/host_variant.hpp"
#include "ninfer/abi/ops/rms_norm.h"
#include "common/numerics.hpp"
#include "common/row_math.hpp"

namespace ninfer::cpu_plugin {
namespace {

int32_t supports_rows(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0; }

} // namespace

void rms_norm_row(const float* s, float* y, int32_t dim, const float* weight, double weight_offset, float eps) {
  const double inv = 1.0 / std::sqrt(sum_squares(s, dim) / dim + eps);
  for (int32_t i = 0; i < dim; ++i) y[i] = static_cast<float>(s[i] * inv * (weight_offset + weight[i]));
}

namespace {

int32_t rms_norm(const void*, const void* args, const ninfer_launch* l, void*, char*, size_t) {
  const auto& a = *static_cast<const ninfer_rms_norm_args*>(args);
  const double offset = a.weight_offset ? 1.0 : 0.0;
  for (int64_t t = l->token_begin; t < l->token_end; ++t) {
    for (int32_t j = 0; j < a.groups; ++j) {
      const float* x = a.x + t * a.x_token_stride + j * a.x_group_stride;
      float* y = a.y + t * a.y_token_stride + j * a.y_group_stride;
      const float* s = x;
      if (a.residual) {
        float* res = a.residual + t * a.residual_token_stride + j * a.residual_group_stride;
        for (int32_t i = 0; i < a.dim; ++i) res[i] = x[i] + res[i];
        s = res;
      }
      rms_norm_row(s, y, a.dim, a.weight, offset, a.eps);
    }
  }
  return NINFER_OK;
}

} // namespace

int32_t register_rms_norm(const ninfer_registrar* r) {
  static const ninfer_variant v = host_variant(NINFER_OP_RMS_NORM, "reference", kF32Only, supports_rows, rms_norm);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
