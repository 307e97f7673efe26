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
//     itself and the 2N-wide projection never goes to memory;
//   - the weight stream is the linear gemv_cc1 kernel's (128 threads, two rows per warp, 16-byte
//     loads through the read-only cache, two steps in flight), which reached 86-91% of the copy
//     rate on the H200.
// No L2 prefetch before the launch wait. Until the eighth session each warp asked for the first
// 4 KB of its rows there (as linear's gemv_cc1 does), which paid while the kernel before it was a
// cuBLASLt call: such a library kernel never triggers an early launch, so the prefetch ran at
// the kernel's own start. With the projections before it on gemv_k4 (a PDL launch), this
// kernel's CTAs start during that GEMV's last wave, and the prefetch then competed with the
// previous GEMV's own stream: without it, decode went 197.4 -> 213.5 tok/s (Qwen3-8B) and
// 70.6 -> 73.2 (Qwen3.5-27B); with 1 KB, 212.3 and 73.4 (docs/performance.md "Eighth session").
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

// Outputs (y columns) one warp / one CTA writes.
__host__ __device__ constexpr int outputs_per_warp(bool gated) { return gated ? 1 : 2; }
__host__ __device__ constexpr int outputs_per_cta(bool gated) { return kWarps * outputs_per_warp(gated); }

// The two weight rows warp `warp` of this CTA streams, and the first output it writes.
struct WarpRows {
  int64_t out;     // first y column
  int64_t row[2];  // weight rows (clamped in range; a clamped row is never stored)
  bool any;        // the warp has an output at all
};
__device__ __forceinline__ WarpRows warp_rows(const ninfer_norm_linear_args& a, int warp) {
  const bool gated = a.gated != 0;
  const int64_t outs = gated ? a.out_features / 2 : a.out_features;
  WarpRows r;
  r.out = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * outputs_per_warp(gated);
  r.any = r.out < outs;
  const int64_t last = a.out_features - 1;
  r.row[0] = min(r.out, last);
  r.row[1] = gated ? min(r.out + outs, last) : min(r.out + 1, last);
  return r;
}

// The launch guarantees in_features % 8 == 0 and 16-byte aligned x rows, norm_w and w.
template <class W>
__device__ void run(const ninfer_norm_linear_args& a, int64_t begin, int64_t end) {
  constexpr int V = WVec<W>::n;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const WarpRows wr = warp_rows(a, warp);
  const bool writes_normed = a.normed && blockIdx.x == 0 && warp == 0;
  if (!wr.any && !writes_normed) return; // no barrier below
  const int K = a.in_features, steps = K / V;
  const float offset = a.norm_offset ? 1.f : 0.f;
  using Raw = typename WVec<W>::raw; // 16 bytes of W
  const Raw* rows[2];
#pragma unroll
  for (int r = 0; r < 2; ++r)
    rows[r] = reinterpret_cast<const Raw*>(static_cast<const W*>(a.w) + wr.row[r] * static_cast<int64_t>(K));
  for (int64_t t = begin + blockIdx.y; t < end; t += gridDim.y) {
    const float* x = a.x + t * a.x_row_stride;
    float acc[2] = {0.f, 0.f}, ss = 0.f;
    for (int s0 = lane; s0 < steps; s0 += 32 * kSteps) {
      Raw wv[kSteps][2];
#pragma unroll
      for (int u = 0; u < kSteps; ++u)
#pragma unroll
        for (int r = 0; r < 2; ++r)
          wv[u][r] = s0 + 32 * u < steps ? __ldg(rows[r] + s0 + 32 * u) : Raw{};
#pragma unroll
      for (int u = 0; u < kSteps; ++u) {
        const int s = s0 + 32 * u;
        if (s >= steps) break;
        float xv[V], gv[V], w0[V], w1[V];
#pragma unroll
        for (int i = 0; i < V; i += 4) {
          const float4 xq = __ldg(reinterpret_cast<const float4*>(x + s * V + i));
          const float4 gq = __ldg(reinterpret_cast<const float4*>(a.norm_w + s * V + i));
          xv[i] = xq.x, xv[i + 1] = xq.y, xv[i + 2] = xq.z, xv[i + 3] = xq.w;
          gv[i] = gq.x, gv[i + 1] = gq.y, gv[i + 2] = gq.z, gv[i + 3] = gq.w;
        }
        WVec<W>::widen(wv[u][0], w0);
        WVec<W>::widen(wv[u][1], w1);
#pragma unroll
        for (int i = 0; i < V; ++i) {
          ss = fmaf(xv[i], xv[i], ss);
          const float xs = xv[i] * (gv[i] + offset);
          acc[0] = fmaf(w0[i], xs, acc[0]);
          acc[1] = fmaf(w1[i], xs, acc[1]);
        }
      }
    }
    ss = warp_sum(ss);
    const float inv_rms = rsqrtf(ss / K + a.eps);
    const float p0 = warp_sum(acc[0]) * inv_rms, p1 = warp_sum(acc[1]) * inv_rms;
    float* y = a.y + t * a.y_row_stride;
    if (lane == 0 && wr.any) {
      if (a.gated) {
        y[wr.out] = silu(p0) * p1;
      } else {
        y[wr.out] = p0;
        if (wr.out + 1 < a.out_features) y[wr.out + 1] = p1;
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

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::norm_linear::kThreads)
    ninfer_norm_linear_f32(ninfer_norm_linear_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::norm_linear::run<float>(a, b, e);
}
extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::norm_linear::kThreads)
    ninfer_norm_linear_bf16(ninfer_norm_linear_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::norm_linear::run<__nv_bfloat16>(a, b, e);
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

struct NormLinearDef : TokenDefDefaults {
  using Args = ninfer_norm_linear_args;
  static constexpr const char* op = NINFER_OP_NORM_LINEAR;
  static constexpr const char* name = "gemv_cc1";
  static constexpr int threads = norm_linear::kThreads;
  static constexpr int32_t geometry = NINFER_GEOMETRY_TOKEN_TILED;
  static constexpr uint32_t dtype_mask = kF32OrBf16Mask;
  static int32_t dtype(const Args& a) { return a.w_dtype; }
  static KernelPair kernels() {
    return {"ninfer_norm_linear_f32", reinterpret_cast<const void*>(ninfer_norm_linear_f32), "ninfer_norm_linear_bf16",
            reinterpret_cast<const void*>(ninfer_norm_linear_bf16)};
  }
  // One token: the weights stream once per token, so batches take rms_norm + a batch GEMV
  // (the model's fallback) instead. 16-byte rows for the vector loads.
  static int32_t supports(const ninfer_shape* s) {
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
    return linear_grid(outs, norm_linear::outputs_per_cta(a.gated != 0), l.grid_x);
  }
};

} // namespace

int32_t register_norm_linear(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<NormLinearDef>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
