// norm_linear for one token (contract: ninfer/abi/ops/norm_linear.h): the decode GEMV with the
// block's RMS norm folded in, and for the MLP the SwiGLU too. Decode is a chain of dependent
// launches, and a separate norm kernel costs ~4 us of the step each time (measured by
// scripts/device-run-ablation.sh: skipping rms_norm saves 0.28 ms of the Qwen3-8B step), so the
// norm rides along with the weight stream instead:
//   - the inverse RMS r is a scalar per token, so sum_k W[n,k] x[k] r s[k] = r sum_k W[n,k] (x[k] s[k]):
//     each warp multiplies x by the norm weight as it reads it, sums x^2 on the side, and scales
//     its two dot products by r at the end; nothing waits for the norm before W starts streaming;
//   - every warp covers the whole reduction (lanes stride over K), so every warp has the whole
//     sum of squares: no shared memory, no barrier;
//   - gated, a warp's two rows are gate row n and up row n + N/2, so it writes silu(gate) * up
//     itself and the 2N-wide projection never goes to memory (gemv_cc1_r4: four rows per warp,
//     gate n, n+1 and up n+N/2, n+1+N/2, so each x and norm-weight load serves twice the bytes);
//   - the weight stream is the linear gemv_cc1 kernel's (128 threads, two rows per warp, 16-byte
//     loads through the read-only cache, two steps in flight, an L2 prefetch of each row's first
//     4 KB before waiting for the previous kernel), which reached 86-91% of the copy rate on the H200.
// x and the norm weight are read through L1 by every warp (K floats each); they are L2-resident.
// Measured on the H200 (scripts/device-run-variant-ab.sh, docs/performance.md "Sixth session"):
// W through ld.global.nc.L1::no_allocate.L2::256B (the tensor-core GEMV's load) decoded the
// Qwen3-8B at 179.6 tok/s, through __ldg at 184.5; a form that stages x * s in shared memory per
// CTA first (two barriers per CTA, the main loop then as light as gemv_cc1's) at 176.3.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "grid_dependency.cuh"
#include "ninfer/abi/ops/norm_linear.h"
#include "pointwise_math.cuh"
#include "weight_vec.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include "../cuda_variant.hpp"
#include "linear_variants.hpp"
#include "token_variant.cuh"
#endif

namespace ninfer::cuda_plugin {
namespace norm_linear {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kSteps = 2;               // 16-byte loads in flight per row per lane
constexpr int kPrefetchBytes = 4096;    // of each row, before the dependency wait

// P row pairs per warp: P = 1 is gemv_cc1's shape (two rows), P = 2 ("gemv_cc1_r4") streams
// four rows per warp, so each x and norm-weight value read from L1 serves twice the weight bytes.
// Outputs (y columns) one warp / one CTA writes.
__host__ __device__ constexpr int outputs_per_warp(bool gated, int P) { return gated ? P : 2 * P; }
__host__ __device__ constexpr int outputs_per_cta(bool gated, int P) { return kWarps * outputs_per_warp(gated, P); }

// The 2P weight rows warp `warp` of this CTA streams, and the first output it writes. Gated,
// rows [0, P) are gate rows out.. and rows [P, 2P) the matching up rows out + N/2..
template <int P>
struct WarpRows {
  int64_t out;        // first y column
  int64_t row[2 * P]; // weight rows (clamped in range; a clamped row is never stored)
  bool any;           // the warp has an output at all
};
template <int P>
__device__ __forceinline__ WarpRows<P> warp_rows(const ninfer_norm_linear_args& a, int warp) {
  const bool gated = a.gated != 0;
  const int64_t outs = gated ? a.out_features / 2 : a.out_features;
  WarpRows<P> r;
  r.out = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * outputs_per_warp(gated, P);
  r.any = r.out < outs;
  const int64_t last = a.out_features - 1;
#pragma unroll
  for (int i = 0; i < 2 * P; ++i)
    r.row[i] = gated ? min(r.out + i % P + (i < P ? 0 : outs), last) : min(r.out + i, last);
  return r;
}

template <class W, int P>
__device__ __forceinline__ void prefetch(const ninfer_norm_linear_args& a) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const WarpRows<P> wr = warp_rows<P>(a, warp);
  if (!wr.any || blockIdx.y != 0) return;
  const int64_t row_bytes = static_cast<int64_t>(a.in_features) * sizeof(W);
  const int64_t span = row_bytes < kPrefetchBytes ? row_bytes : kPrefetchBytes;
#pragma unroll
  for (int r = 0; r < 2 * P; ++r) {
    const char* p = static_cast<const char*>(a.w) + wr.row[r] * row_bytes;
    for (int64_t off = lane * 128; off < span; off += 32 * 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + off));
  }
}

// The launch guarantees in_features % 8 == 0 and 16-byte aligned x rows, norm_w and w.
template <class W, int P>
__device__ void run(const ninfer_norm_linear_args& a, int64_t begin, int64_t end) {
  constexpr int V = WVec<W>::n, R = 2 * P;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const WarpRows<P> wr = warp_rows<P>(a, warp);
  const bool writes_normed = a.normed && blockIdx.x == 0 && warp == 0;
  if (!wr.any && !writes_normed) return; // no barrier below
  const int K = a.in_features, steps = K / V;
  const float offset = a.norm_offset ? 1.f : 0.f;
  using Raw = typename WVec<W>::raw; // 16 bytes of W
  const Raw* rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r)
    rows[r] = reinterpret_cast<const Raw*>(static_cast<const W*>(a.w) + wr.row[r] * static_cast<int64_t>(K));
  for (int64_t t = begin + blockIdx.y; t < end; t += gridDim.y) {
    const float* x = a.x + t * a.x_row_stride;
    float acc[R], ss = 0.f;
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.f;
    for (int s0 = lane; s0 < steps; s0 += 32 * kSteps) {
      Raw wv[kSteps][R];
#pragma unroll
      for (int u = 0; u < kSteps; ++u)
#pragma unroll
        for (int r = 0; r < R; ++r)
          wv[u][r] = s0 + 32 * u < steps ? __ldg(rows[r] + s0 + 32 * u) : Raw{};
#pragma unroll
      for (int u = 0; u < kSteps; ++u) {
        const int s = s0 + 32 * u;
        if (s >= steps) break;
        float xs[V];
#pragma unroll
        for (int i = 0; i < V; i += 4) {
          const float4 xq = __ldg(reinterpret_cast<const float4*>(x + s * V + i));
          const float4 gq = __ldg(reinterpret_cast<const float4*>(a.norm_w + s * V + i));
          const float xv[4] = {xq.x, xq.y, xq.z, xq.w}, gv[4] = {gq.x, gq.y, gq.z, gq.w};
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            ss = fmaf(xv[j], xv[j], ss);
            xs[i + j] = xv[j] * (gv[j] + offset);
          }
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float wf[V];
          WVec<W>::widen(wv[u][r], wf);
#pragma unroll
          for (int i = 0; i < V; ++i) acc[r] = fmaf(wf[i], xs[i], acc[r]);
        }
      }
    }
    ss = warp_sum(ss);
    const float inv_rms = rsqrtf(ss / K + a.eps);
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = warp_sum(acc[r]) * inv_rms;
    float* y = a.y + t * a.y_row_stride;
    if (lane == 0 && wr.any) {
      if (a.gated) {
        const int64_t outs = a.out_features / 2;
#pragma unroll
        for (int p = 0; p < P; ++p)
          if (wr.out + p < outs) y[wr.out + p] = silu(acc[p]) * acc[P + p];
      } else {
#pragma unroll
        for (int r = 0; r < R; ++r)
          if (wr.out + r < a.out_features) y[wr.out + r] = acc[r];
      }
    }
    if (writes_normed) {
      float* xn = a.normed + t * a.normed_row_stride;
      for (int k = lane; k < K; k += 32) xn[k] = x[k] * inv_rms * (a.norm_w[k] + offset);
    }
  }
}

} // namespace norm_linear
} // namespace ninfer::cuda_plugin

#define NINFER_NORM_LINEAR_KERNEL(name, W, P)                                                                 \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::norm_linear::kThreads)                      \
      name(ninfer_norm_linear_args a, int64_t b, int64_t e) {                                                   \
    ninfer::cuda_plugin::norm_linear::prefetch<W, P>(a);                                                        \
    ninfer::cuda_plugin::grid_dependency_prologue();                                                            \
    ninfer::cuda_plugin::norm_linear::run<W, P>(a, b, e);                                                       \
  }
NINFER_NORM_LINEAR_KERNEL(ninfer_norm_linear_f32, float, 1)
NINFER_NORM_LINEAR_KERNEL(ninfer_norm_linear_bf16, __nv_bfloat16, 1)
NINFER_NORM_LINEAR_KERNEL(ninfer_norm_linear_r4_f32, float, 2)
NINFER_NORM_LINEAR_KERNEL(ninfer_norm_linear_r4_bf16, __nv_bfloat16, 2)
#undef NINFER_NORM_LINEAR_KERNEL

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

// P row pairs per warp (see outputs_per_warp); the variants differ in that only.
template <int P>
struct NormLinearDef : TokenDefDefaults {
  using Args = ninfer_norm_linear_args;
  static constexpr const char* op = NINFER_OP_NORM_LINEAR;
  static constexpr const char* name = P == 1 ? "gemv_cc1" : "gemv_cc1_r4";
  static constexpr int threads = norm_linear::kThreads;
  static constexpr int32_t geometry = NINFER_GEOMETRY_TOKEN_TILED;
  static constexpr uint32_t dtype_mask = kF32OrBf16Mask;
  static int32_t dtype(const Args& a) { return a.w_dtype; }
  static KernelPair kernels() {
    if constexpr (P == 1)
      return {"ninfer_norm_linear_f32", reinterpret_cast<const void*>(ninfer_norm_linear_f32),
              "ninfer_norm_linear_bf16", reinterpret_cast<const void*>(ninfer_norm_linear_bf16)};
    else
      return {"ninfer_norm_linear_r4_f32", reinterpret_cast<const void*>(ninfer_norm_linear_r4_f32),
              "ninfer_norm_linear_r4_bf16", reinterpret_cast<const void*>(ninfer_norm_linear_r4_bf16)};
  }
  // One token: the weights stream once per token, so batches take rms_norm + a batch GEMV
  // (the model's fallback) instead. 16-byte rows for the vector loads.
  static int32_t supports(const ninfer_shape* s) {
    const bool gated = s->dims[2] != 0;
    return s->tokens == 1 && s->dims[0] > 0 && s->dims[0] % 8 == 0 && s->dims[0] <= INT32_MAX && s->dims[1] > 0 &&
           s->dims[1] <= INT32_MAX && (!gated || s->dims[1] % 2 == 0);
  }
  static const char* invalid(const Args& a, const ninfer_launch&) {
    if (a.w_dtype != NINFER_DTYPE_F32 && a.w_dtype != NINFER_DTYPE_BF16) return "w_dtype must be F32 or BF16";
    if (a.in_features < 8 || a.in_features % 8 != 0) return "in_features must be a positive multiple of 8";
    if (a.out_features < 1 || (a.gated && a.out_features % 2 != 0)) return "out_features must be >= 1 (gated: even)";
    const auto misaligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 != 0; };
    if (misaligned(a.x) || (a.tokens > 1 && a.x_row_stride % 4 != 0) || misaligned(a.norm_w) || misaligned(a.w))
      return "x rows, norm_w and w must be 16-byte aligned";
    return nullptr;
  }
  // grid.x: blocks of outputs (from the shape alone); grid.y: the planner's token tiles.
  static dim3 grid(const Args& a, const ninfer_launch& l) {
    const int32_t outs = a.gated ? a.out_features / 2 : a.out_features;
    return linear_grid(outs, norm_linear::outputs_per_cta(a.gated != 0, P), l.grid_x);
  }
};

} // namespace

int32_t register_norm_linear(const ninfer_registrar* r, char* err, size_t err_len) {
  // gemv_cc1 first: where both reach the same residency the planner keeps it, and the tables
  // name gemv_cc1_r4 only where a measurement chose it.
  return add_token_variants<NormLinearDef<1>, NormLinearDef<2>>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
