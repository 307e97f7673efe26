// The row norms on the host: rms_norm, l2_norm and gated_rms_norm (contracts in
// ninfer/abi/ops/). Sums of squares accumulate in double; every output element is computed
// from the row's values read before any is written, so in-place calls are safe.
#include <cmath>

#include <initializer_list>

#include "cpu_ops.hpp"
#include "host_variant.hpp"
#include "ninfer/abi/ops/gated_rms_norm.h"
#include "ninfer/abi/ops/l2_norm.h"
#include "ninfer/abi/ops/rms_norm.h"
#include "numerics.hpp"
#include "row_math.hpp"

namespace ninfer::cpu_plugin {
namespace {

int32_t supports_rows(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0; }

double sum_squares(const float* r, int32_t n) {
  double ss = 0;
  for (int32_t i = 0; i < n; ++i) ss += static_cast<double>(r[i]) * r[i];
  return ss;
}

} // namespace

void rms_norm_row(const float* s, float* y, int32_t dim, const float* weight, double weight_offset, float eps) {
  const double inv = 1.0 / std::sqrt(sum_squares(s, dim) / dim + eps);
  for (int32_t i = 0; i < dim; ++i) y[i] = static_cast<float>(s[i] * inv * (weight_offset + weight[i]));
}

void l2_norm_row(float* x, int32_t dim, float eps) {
  const double inv = 1.0 / std::sqrt(sum_squares(x, dim) + eps);
  for (int32_t i = 0; i < dim; ++i) x[i] = static_cast<float>(x[i] * inv);
}

void gated_rms_norm_row(const float* x, const float* z, float* y, int32_t dim, const float* weight, float eps) {
  const double inv = 1.0 / std::sqrt(sum_squares(x, dim) / dim + eps);
  for (int32_t i = 0; i < dim; ++i) y[i] = static_cast<float>(x[i] * inv * weight[i] * silu(z[i]));
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

int32_t l2_norm(const void*, const void* args, const ninfer_launch* l, void*, char*, size_t) {
  const auto& a = *static_cast<const ninfer_l2_norm_args*>(args);
  for (int64_t t = l->token_begin; t < l->token_end; ++t) {
    for (int32_t h = 0; h < a.heads; ++h) l2_norm_row(a.x + t * a.token_stride + h * a.head_stride, a.dim, a.eps);
  }
  return NINFER_OK;
}

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

int32_t register_norms(const ninfer_registrar* r) {
  static const ninfer_variant rms = host_variant(NINFER_OP_RMS_NORM, "reference", kF32Only, supports_rows, rms_norm);
  static const ninfer_variant l2 = host_variant(NINFER_OP_L2_NORM, "reference", kF32Only, supports_rows, l2_norm);
  static const ninfer_variant gated =
      host_variant(NINFER_OP_GATED_RMS_NORM, "reference", kF32Only, supports_rows, gated_rms_norm);
  for (const ninfer_variant* v : {&rms, &l2, &gated})
    if (int32_t rc = r->add_variant(r->ctx, v); rc != NINFER_OK) return rc;
  return NINFER_OK;
}

} // namespace ninfer::cpu_plugin
