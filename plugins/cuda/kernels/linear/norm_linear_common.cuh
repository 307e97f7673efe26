// What norm_linear's CUDA variants (contract: ninfer/abi/ops/norm_linear.h) share: gemv_warp_t1
// (linear/norm_linear_gemv_warp.cu: a warp per row pair, the whole reduction) and gemv_4warps
// (linear/norm_linear_gemv_4warps.cu: four warps per row pair, a quarter of the reduction each).
// The same rows, the same arithmetic per weight vector, the same stores and the same launch
// conditions; they differ in who adds what.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ninfer/abi/ops/norm_linear.h"
#include "common/pointwise_math.cuh"
#include "linear/weight_vec.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include "linear/variants.hpp"
#include "common/token_variant.cuh"
#endif

namespace ninfer::cuda_plugin::norm_linear {

// Outputs (y columns) one row pair gives: gated, gate row n and up row n + N/2 give y[n], so the
// 2N-wide projection never goes to memory; else rows n and n + 1 give y[n] and y[n + 1].
__host__ __device__ constexpr int outputs_per_pair(bool gated) { return gated ? 1 : 2; }

// The two weight rows of row pair `pair` (counted over the grid) and the first output it writes.
struct RowPair {
  int64_t out;     // first y column
  int64_t row[2];  // weight rows (clamped in range; a clamped row is computed, never stored)
  bool any;        // the pair has an output at all
};
__device__ __forceinline__ RowPair row_pair(const ninfer_norm_linear_args& a, int64_t pair) {
  const bool gated = a.gated != 0;
  const int64_t outs = gated ? a.out_features / 2 : a.out_features;
  RowPair r;
  r.out = pair * outputs_per_pair(gated);
  r.any = r.out < outs;
  const int64_t last = a.out_features - 1;
  r.row[0] = min(r.out, last);
  r.row[1] = gated ? min(r.out + outs, last) : min(r.out + 1, last);
  return r;
}

// One 16-byte vector v of both rows: x multiplied by the norm weight as it is read (the inverse
// RMS is a scalar per token, so it scales the finished dot products instead: W streams before
// the norm is known), x^2 summed on the side. x and norm_w 16-byte aligned.
template <class W>
__device__ __forceinline__ void norm_dot_step(int v, const typename WVec<W>::raw (&wv)[2], const float* x,
                                              const float* norm_w, float offset, float (&acc)[2], float& ss) {
  constexpr int V = WVec<W>::n;
  float xv[V], gv[V], w0[V], w1[V];
#pragma unroll
  for (int i = 0; i < V; i += 4) {
    const float4 xq = __ldg(reinterpret_cast<const float4*>(x + v * V + i));
    const float4 gq = __ldg(reinterpret_cast<const float4*>(norm_w + v * V + i));
    xv[i] = xq.x, xv[i + 1] = xq.y, xv[i + 2] = xq.z, xv[i + 3] = xq.w;
    gv[i] = gq.x, gv[i + 1] = gq.y, gv[i + 2] = gq.z, gv[i + 3] = gq.w;
  }
  WVec<W>::widen(wv[0], w0);
  WVec<W>::widen(wv[1], w1);
#pragma unroll
  for (int i = 0; i < V; ++i) {
    ss = fmaf(xv[i], xv[i], ss);
    const float xs = xv[i] * (gv[i] + offset);
    acc[0] = fmaf(w0[i], xs, acc[0]);
    acc[1] = fmaf(w1[i], xs, acc[1]);
  }
}

// Token t's outputs of row pair rp from its two finished (already RMS-scaled) dot products.
__device__ __forceinline__ void store_outputs(const ninfer_norm_linear_args& a, int64_t t, const RowPair& rp,
                                              float p0, float p1) {
  float* y = a.y + t * a.y_row_stride;
  if (a.gated) {
    y[rp.out] = silu(p0) * p1;
  } else {
    y[rp.out] = p0;
    if (rp.out + 1 < a.out_features) y[rp.out + 1] = p1;
  }
}

// Token t's normed row (a.normed non-null), elements first, first + stride, ...
__device__ __forceinline__ void store_normed(const ninfer_norm_linear_args& a, int64_t t, const float* x,
                                             float inv_rms, float offset, int first, int stride) {
  float* xn = a.normed + t * a.normed_row_stride;
  for (int k = first; k < a.in_features; k += stride) xn[k] = x[k] * inv_rms * (a.norm_w[k] + offset);
}

#ifndef __CUDACC_RTC__
// The variant definition (common/token_variant.cuh) less its name, block size and kernels, for
// kernels whose CTA owns kPairsPerCta row pairs.
template <int kPairsPerCta>
struct DefBase : TokenDefDefaults {
  using Args = ninfer_norm_linear_args;
  static constexpr const char* op = NINFER_OP_NORM_LINEAR;
  static constexpr int32_t geometry = NINFER_GEOMETRY_TOKEN_TILED;
  static constexpr uint32_t dtype_mask = kF32OrBf16Mask;
  static int32_t dtype(const Args& a) { return a.w_dtype; }
  // One token: the weights stream once per token, so batches take rms_norm + a batch GEMV
  // (the model's fallback) instead. 16-byte rows for the vector loads.
  static int32_t supports(const void*, const ninfer_shape* s) {
    const bool gated = s->dims[2] != 0;
    return one_token_vector_rows(*s) && (!gated || s->dims[1] % 2 == 0);
  }
  static const char* invalid(const Args& a, const ninfer_launch&) {
    if (a.w_dtype != NINFER_DTYPE_F32 && a.w_dtype != NINFER_DTYPE_BF16) return "w_dtype must be F32 or BF16";
    if (a.in_features < 8 || a.in_features % 8 != 0) return "in_features must be a positive multiple of 8";
    if (a.out_features < 1 || (a.gated && a.out_features % 2 != 0)) return "out_features must be >= 1 (gated: even)";
    if (!x_rows_aligned16(a.x, a.tokens, a.x_row_stride) || !aligned16(a.norm_w) || !aligned16(a.w))
      return "x rows, norm_w and w must be 16-byte aligned";
    return nullptr;
  }
  // grid.x: blocks of outputs (from the shape alone); grid.y: the planner's token tiles.
  static dim3 grid(const Args& a, const ninfer_launch& l) {
    const int32_t outs = a.gated ? a.out_features / 2 : a.out_features;
    return linear_grid(outs, kPairsPerCta * outputs_per_pair(a.gated != 0), l.grid_x);
  }
};
#endif // __CUDACC_RTC__

} // namespace ninfer::cuda_plugin::norm_linear
