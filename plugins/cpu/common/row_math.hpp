// Row functions shared by op families: head_norm_rope is rms_norm then rope, norm_linear is
// rms_norm, linear and silu_mul, conv_l2_norm is causal_conv1d then l2_norm, gated_delta_step
// ends in gated_rms_norm, and each runs the very same code as the ops it fuses, so the fused op
// and the unfused ones give identical bits.
#pragma once

#include <cstdint>

namespace ninfer::cpu_plugin {

// The sum of a row's squares, in double: the norms' accumulation.
inline double sum_squares(const float* r, int32_t n) {
  double ss = 0;
  for (int32_t i = 0; i < n; ++i) ss += static_cast<double>(r[i]) * r[i];
  return ss;
}

// y[i] = s[i] * rsqrt(mean(s^2) + eps) * (weight_offset + weight[i]), in double, rounded once
// to float32 (pointwise/rms_norm.cpp). y may be s.
void rms_norm_row(const float* s, float* y, int32_t dim, const float* weight, double weight_offset, float eps);

// x[i] *= rsqrt(sum(x^2) + eps), in double, rounded once to float32 (pointwise/l2_norm.cpp).
void l2_norm_row(float* x, int32_t dim, float eps);

// y[i] = x[i] * rsqrt(mean(x^2) + eps) * weight[i] * silu(z[i]), in double, rounded once to
// float32 (pointwise/gated_rms_norm.cpp). y may be x.
void gated_rms_norm_row(const float* x, const float* z, float* y, int32_t dim, const float* weight, float eps);

// o[i] = silu(gate[i]) * up[i] for i < width, in double, rounded once to float32
// (pointwise/silu_mul.cpp).
void silu_mul_row(const float* gate, const float* up, float* o, int64_t width);

// cos and sin of position * theta^(-2i / rotary_dim), i < rotary_dim / 2, in double
// (pointwise/rope.cpp).
void rope_angles(int32_t position, double theta, int32_t rotary_dim, double* cos_out, double* sin_out);
// Rotates the half-split pairs (x[i], x[i + half]), i < half, by the angles' cos and sin.
void rope_rotate_row(float* x, int32_t half, const double* cos_in, const double* sin_in);

} // namespace ninfer::cpu_plugin
