// rope on the host (contract: ninfer/abi/ops/rope.h). Angles in double: at position 262,144 a
// float32 angle would already be off by ~0.01 rad.
#include <cmath>
#include <vector>

#include "common/cpu_ops.hpp"
#include "common/host_variant.hpp"
#include "ninfer/abi/ops/rope.h"
#include "common/row_math.hpp"

namespace ninfer::cpu_plugin {

void rope_angles(int32_t position, double theta, int32_t rotary_dim, double* cos_out, double* sin_out) {
  const double p = position;
  for (int32_t i = 0; i < rotary_dim / 2; ++i) {
    const double inv_freq = std::pow(theta, -2.0 * i / rotary_dim);
    cos_out[i] = std::cos(p * inv_freq);
    sin_out[i] = std::sin(p * inv_freq);
  }
}

void rope_rotate_row(float* x, int32_t half, const double* cos_in, const double* sin_in) {
  for (int32_t i = 0; i < half; ++i) {
    const double x1 = x[i], x2 = x[i + half];
    x[i] = static_cast<float>(x1 * cos_in[i] - x2 * sin_in[i]);
    x[i + half] = static_cast<float>(x2 * cos_in[i] + x1 * sin_in[i]);
  }
}

namespace {

int32_t supports(const void*, const ninfer_shape* s) {
  const int64_t head_dim = s->dims[0], rotary = s->dims[2];
  return s->tokens > 0 && head_dim > 0 && s->dims[1] > 0 && rotary > 0 && rotary % 2 == 0 && rotary <= head_dim;
}

int32_t launch(const void*, const void* args, const ninfer_launch* l, void*, char* err, size_t err_len) {
  const auto& a = *static_cast<const ninfer_rope_args*>(args);
  if (a.rotary_dim <= 0 || a.rotary_dim % 2 || a.rotary_dim > a.head_dim)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "rotary_dim %d must be even and in (0, head_dim=%d]",
                a.rotary_dim, a.head_dim);
  const int32_t half = a.rotary_dim / 2;
  std::vector<double> c(half), s(half);
  for (int64_t t = l->token_begin; t < l->token_end; ++t) {
    rope_angles(a.positions[t], a.theta, a.rotary_dim, c.data(), s.data());
    for (int32_t h = 0; h < a.heads; ++h)
      rope_rotate_row(a.x + t * a.token_stride + h * a.head_stride, half, c.data(), s.data());
  }
  return NINFER_OK;
}

} // namespace

int32_t register_rope(const ninfer_registrar* r) {
  static const ninfer_variant v = host_variant(NINFER_OP_ROPE, "reference", kF32Only, supports, launch);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
