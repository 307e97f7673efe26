// Scalar device math shared by the pointwise kernels. Full-precision library functions (expf,
// not __expf): the CPU reference evaluates these in double, and the GPU must stay within the
// float32 tolerance of it.
#pragma once

#include <cuda_bf16.h>

namespace ninfer::cuda_plugin {

__device__ __forceinline__ float silu(float z) { return z / (1.f + expf(-z)); }
__device__ __forceinline__ float sigmoid(float z) { return 1.f / (1.f + expf(-z)); }

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Rotary embedding angles (rope.h), shared by rope and head_norm_rope so both rotate by the
// same float32 cos and sin. inv_freq of pair i is evaluated once per CTA.
__device__ __forceinline__ double rope_inv_freq(double theta, int i, int rotary_dim) {
  return pow(theta, -2.0 * i / rotary_dim);
}
// The angle p * inv_freq is formed and reduced modulo 2*pi in double (at position 262,144 a
// float32 angle would be off by ~0.01 rad); the reduced angle in [-pi, pi] goes to sincosf.
__device__ __forceinline__ void rope_sin_cos(double position, double inv_freq, float* sin_out, float* cos_out) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  const double angle = position * inv_freq;
  const double reduced = fma(-rint(angle / kTwoPi), kTwoPi, angle);
  sincosf(static_cast<float>(reduced), sin_out, cos_out);
}

} // namespace ninfer::cuda_plugin
