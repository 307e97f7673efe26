// norm_linear for one token with each row pair's reduction split across four warps: `gemv_4warps`
// (contract: ninfer/abi/ops/norm_linear.h). gemv_warp_t1's fused norm
// (linear/norm_linear_gemv_warp.cu) on linear's gemv_4warps stream (linear/linear_gemv_4warps.cu).
//
// Why: on the H200 the split reduction lifted the short one-token GEMVs from 56-83% to 85-104% of
// the copy rate, because each warp's walk is a quarter as long and four times as many warps are
// in flight (docs/performance.md); norm_linear's q|k|v and gate|up projections
// are such GEMVs. But routed for one token in the decode step it was 3-5% slower than gemv_warp_t1
// on the Qwen3-8B and the Qwen3.5-27B (docs/performance.md: the x and norm-weight
// reads each of the four slices repeats cost more than the shorter walk buys). So no built-in
// table routes it: it is registered after gemv_warp_t1 (the planner's own route stays gemv_warp_t1)
// for ninfer-tune, the A/B scripts and table entries that name it, e.g. on other cards.
//
// Layout: 256 threads = 8 warps = 2 row groups x 4 reduction slices. Gated, a group computes one
// output (gate row n and up row n + N/2: silu(gate) * up); otherwise two adjacent ones (rows n,
// n + 1), as in linear's gemv_4warps. Slice j streams the j-th quarter of both rows, multiplies x
// by the norm weight as it reads it and sums x^2 over its quarter on the side. The slices' dot
// products and x^2 partials meet in shared memory and are added in slice order, so results are
// deterministic (graph replay equals eager, bit for bit); the inverse RMS then scales the sums.
// No L2 prefetch before the launch wait (it competed with the previous GEMV's stream, see
// linear/norm_linear_gemv_warp.cu).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/grid_dependency.cuh"
#include "linear/norm_linear_common.cuh"
#include "common/pointwise_math.cuh"
#include "linear/row_pair_stream.cuh"
#include "linear/weight_vec.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include "../../cuda_variant.hpp"
#include "common/token_variant.cuh"
#endif

namespace ninfer::cuda_plugin::norm_linear_4warps {

using namespace split4; // the layout (linear/row_pair_stream.cuh)

// The launch guarantees in_features % 8 == 0 and 16-byte aligned x rows, norm_w and w.
template <class W>
__device__ void run(const ninfer_norm_linear_args& a, int64_t begin, int64_t end) {
  constexpr int V = WVec<W>::n;
  using Raw = typename WVec<W>::raw;
  __shared__ float partial[kWarps][3]; // each warp's two dot products and sum of x^2
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, slice = warp % kSlices;
  // A pair past the last output keeps clamped rows: computed, never stored (every warp reaches
  // the barriers).
  const norm_linear::RowPair rp = norm_linear::row_pair(a, static_cast<int64_t>(blockIdx.x) * kGroups + warp / kSlices);
  const int K = a.in_features;
  const float offset = a.norm_offset ? 1.f : 0.f;
  const VectorRange range = slice_range(K / V, slice, kSlices);
  for (int64_t t = begin + blockIdx.y; t < end; t += gridDim.y) {
    const float* x = a.x + t * a.x_row_stride;
    float acc[2] = {0.f, 0.f}, ss = 0.f;
    stream_row_pair<kSteps>(static_cast<const W*>(a.w), K, rp.row[0], rp.row[1], range, [&](int v, const Raw (&wv)[2]) {
      norm_linear::norm_dot_step<W>(v, wv, x, a.norm_w, offset, acc, ss);
    });
    acc[0] = warp_sum(acc[0]);
    acc[1] = warp_sum(acc[1]);
    ss = warp_sum(ss);
    if (lane == 0) partial[warp][0] = acc[0], partial[warp][1] = acc[1], partial[warp][2] = ss;
    __syncthreads();
    // Each group's slices cover all of K, so any group's x^2 sum is the token's; group 0's (warps
    // 0-3) is used everywhere, so the outputs and the normed row share one inverse RMS.
    float ss_all = 0.f;
#pragma unroll
    for (int j = 0; j < kSlices; ++j) ss_all += partial[j][2];
    const float inv_rms = rsqrtf(ss_all / K + a.eps);
    if (slice == 0 && lane == 0 && rp.any) {
      float p0 = 0.f, p1 = 0.f;
#pragma unroll
      for (int j = 0; j < kSlices; ++j) p0 += partial[warp + j][0], p1 += partial[warp + j][1];
      norm_linear::store_outputs(a, t, rp, p0 * inv_rms, p1 * inv_rms);
    }
    if (a.normed && blockIdx.x == 0) norm_linear::store_normed(a, t, x, inv_rms, offset, threadIdx.x, kThreads);
    __syncthreads(); // partial is rewritten by the next token
  }
}

} // namespace ninfer::cuda_plugin::norm_linear_4warps

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::norm_linear_4warps::kThreads)
    ninfer_norm_linear_gemv_4warps_f32(ninfer_norm_linear_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::norm_linear_4warps::run<float>(a, b, e);
}
extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::norm_linear_4warps::kThreads)
    ninfer_norm_linear_gemv_4warps_bf16(ninfer_norm_linear_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::norm_linear_4warps::run<__nv_bfloat16>(a, b, e);
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

struct NormLinear4WarpsDef : norm_linear::DefBase<norm_linear_4warps::kGroups> {
  static constexpr const char* name = "gemv_4warps";
  static constexpr int threads = norm_linear_4warps::kThreads;
  static KernelPair kernels() {
    return {"ninfer_norm_linear_gemv_4warps_f32", reinterpret_cast<const void*>(ninfer_norm_linear_gemv_4warps_f32),
            "ninfer_norm_linear_gemv_4warps_bf16", reinterpret_cast<const void*>(ninfer_norm_linear_gemv_4warps_bf16)};
  }
};

} // namespace

int32_t register_norm_linear_gemv_4warps(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<NormLinear4WarpsDef>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
