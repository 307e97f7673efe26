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

} // namespace ninfer::cuda_plugin
