// One 16-byte load of a weight row as float32 values (8 bf16 or 4 f32 elements): the unit the
// CUDA-core GEMVs stream W in (linear/linear_gemv_mma.cu, linear/row_pair_stream.cuh).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace ninfer::cuda_plugin {

template <class W>
struct WVec;
template <>
struct WVec<__nv_bfloat16> {
  static constexpr int n = 8;
  using raw = uint4;
  __device__ static void widen(const uint4& v, float (&f)[8]) {
    const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      f[2 * i] = __uint_as_float(u[i] << 16);
      f[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
    }
  }
};
template <>
struct WVec<float> {
  static constexpr int n = 4;
  using raw = float4;
  __device__ static void widen(const float4& v, float (&f)[4]) {
    f[0] = v.x;
    f[1] = v.y;
    f[2] = v.z;
    f[3] = v.w;
  }
};

} // namespace ninfer::cuda_plugin
