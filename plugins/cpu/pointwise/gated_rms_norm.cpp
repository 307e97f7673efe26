// gated_rms_norm on the host (contract: ninfer/abi/ops/gated_rms_norm.h): each head's row
// normalised, weighted and gated by silu(z). The sum of squares accumulates in double; every
// output element is computed from the row's values read before any is written, so in-place
// calls are safe.
#include <cmath>

#include "common/cpu_ops.hpp"
#include "common/host_variant.hpp"
#include "ninfer/abi/ops/gated_rms_norm.h"
#include "common/numerics.hpp"
#include "common/row_math.hpp"

namespace ninfer::cpu_plugin {
namespace {

int32_t supports_rows(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0; }

} // namespace

void gated_rms_norm_row(const float* x, const float* z, float* y, int32_t dim, const float* weight, float eps) {
  const double inv = 1.0 / std::sqrt(sum_squares(x, dim) / dim + eps);
  for (int32_t i = 0; i < dim; ++i) y[i] = static_cast<float>(x[i] * inv * weight[i] * silu(z[i]));
}

namespace {

int32_t gated_rms_norm(const void*, const void* args, const ninfer_launch* l, void*, char*, size_t) {
  const auto& a = *static_cast<const ninfer_gated_rms_norm_args*>(args);
  for (int64_t t = l->token_begin; t < l->token_end; ++t) {
    for (int32_t h = 0; h < a.heads; ++h) {
      const float* x = a.x + t * a.x_token_stride + static_cast<int64_t>(h) * a.dim;
      const float* z = a.z + t * a.z_token_stride + static_cast<int64_t>(h) * a.dim;
      gated_rms_norm_row(x, z, a.y + t * a.y_token_stride + static_cast<int64_t>(h) * a.dim, a.dim, a.weight, a.eps);
    }
  }
  return NINFER_OK;
}

} // namespace

int32_t register_gated_rms_norm(const ninfer_registrar* r) {
  static const ninfer_variant v = host_variant(NINFER_OP_GATED_RMS_NORM, "reference", kF32Only, supports_rows, gated_rms_norm);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
