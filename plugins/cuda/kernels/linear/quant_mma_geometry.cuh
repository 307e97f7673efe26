// What gemv_quant_mma and gemv_quant_mma_split (linear/linear_gemv_quant_mma.cu,
// linear/linear_gemv_quant_mma_split.cu) share: the CTA's shape, the steps of the codes' ring,
// the split of the reduction from the shape alone, and the bf16 forms of x and of int8 codes
// that feed their MMAs. Host and device code both include it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "linear/linear_gemv_mma_bf16.cuh"
#include "linear/quant_common.cuh"

namespace ninfer::cuda_plugin::quant_mma {

using quant::u32;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kTokens = 8;         // the MMA's n
constexpr int kMR = 2;             // 16-row tiles per warp
constexpr int kStages = 3;         // ring slots per warp: kStages - 1 steps in flight while one is used
constexpr int kStepBytes = 64;     // bytes of each row per warp step (4 lanes x 16)
constexpr int kTargetWarps = 4096; // warps in flight the split aims for (a property of the shape)

// Warps along the reduction per group of 16 * kMR rows: powers of two up to the CTA's 8, while
// the launch has fewer than kTargetWarps warps per token tile and each warp keeps >= 2 steps.
__host__ __device__ constexpr int splits(int out_features, int steps) {
  const long long groups = (static_cast<long long>(out_features) + 16 * kMR - 1) / (16 * kMR);
  int s = 1;
  while (s < kWarps && groups * s < kTargetWarps && steps / (2 * s) >= 2) s *= 2;
  return s;
}

__host__ __device__ constexpr int rows_per_cta(int out_features, int steps) {
  return kWarps / splits(out_features, steps) * 16 * kMR;
}

// Two x values as the bf16 pairs hi and lo (x = hi + lo + O(2^-17 |x|)).
struct XPair {
  u32 hi, lo;
};
__device__ __forceinline__ XPair split_x(float first, float second) {
  const u32 hi = gemv_bf16::pack_bf16(first, second);
  return {hi, gemv_bf16::pack_bf16(first - gemv_bf16::bf16_lo(hi), second - gemv_bf16::bf16_hi(hi))};
}

// Bytes b and b + 1 of w as the bf16 pair (u - zero); bias = 2^23 + zero.
__device__ __forceinline__ u32 int8_pair(u32 w, int b, float bias) {
  const float lo = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7540u | b)) - bias;
  const float hi = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7540u | (b + 1))) - bias;
  return gemv_bf16::pack_bf16(lo, hi);
}

} // namespace ninfer::cuda_plugin::quant_mma
