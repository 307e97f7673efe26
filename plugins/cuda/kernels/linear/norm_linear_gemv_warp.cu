// norm_linear for one token (contract: ninfer/abi/ops/norm_linear.h), variant gemv_warp_t1: the
// decode GEMV with the block's RMS norm folded in, and for the MLP the SwiGLU too. (gemv_4warps,
// linear/norm_linear_gemv_4warps.cu, splits each row pair's reduction across four warps; the row
// rule, the per-vector arithmetic, the stores and the launch conditions are shared:
// linear/norm_linear_common.cuh.) Decode is a chain of dependent launches, and a separate norm
// kernel costs ~4 us of the step each time (measured by scripts/device-run-ablation.sh: skipping
// rms_norm saves 0.28 ms of the Qwen3-8B step), so the norm rides along with the weight stream
// instead:
//   - the inverse RMS r is a scalar per token, so sum_k W[n,k] x[k] r s[k] = r sum_k W[n,k] (x[k]
//     s[k]): each warp multiplies x by the norm weight as it reads it, sums x^2 on the side, and
//     scales its two dot products by r at the end; nothing waits for the norm before W starts
//     streaming;
//   - every warp covers the whole reduction (lanes stride over K), so every warp has the whole
//     sum of squares: no shared memory, no barrier;
//   - gated, a warp's two rows are gate row n and up row n + N/2, so it writes silu(gate) * up
//     itself and the 2N-wide projection never goes to memory;
//   - the weight stream is the linear gemv_warp_t1 kernel's (128 threads, two rows per warp,
//     16-byte loads through the read-only cache, two steps in flight), which reached 86-91% of the
//     copy rate on the H200.
// No L2 prefetch before the launch wait. A prefetch of the first 4 KB of each warp's rows there
// (as linear's gemv_warp_t1 does) pays only behind a cuBLASLt call, which never triggers an
// early launch, so the prefetch runs at the kernel's own start. Behind the projections on
// gemv_4warps (a PDL launch) this kernel's CTAs start during that GEMV's last wave, and a
// prefetch competes with the previous GEMV's own stream: without it decode is 213.5 tok/s
// against 197.4 (Qwen3-8B) and 73.2 against 70.6 (Qwen3.5-27B); with 1 KB, 212.3 and 73.4
// (docs/performance.md).
// x and the norm weight are read through L1 by every warp (K floats each); they are L2-resident.
// Measured on the H200 (scripts/device-run-variant-ab.sh, docs/performance.md):
// W through ld.global.nc.L1::no_allocate.L2::256B (the tensor-core GEMV's load) decoded the
// Qwen3-8B at 179.6 tok/s, through __ldg at 184.5; a form that stages x * s in shared memory per
// CTA first (two barriers per CTA, the main loop then as light as gemv_warp_t1's) at 176.3.
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

namespace ninfer::cuda_plugin {
namespace norm_linear {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32; // one row pair each
constexpr int kSteps = 2;             // 16-byte loads in flight per row per lane

// The launch guarantees in_features % 8 == 0 and 16-byte aligned x rows, norm_w and w.
template <class W>
__device__ void run(const ninfer_norm_linear_args& a, int64_t begin, int64_t end) {
  constexpr int V = WVec<W>::n;
  using Raw = typename WVec<W>::raw;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const RowPair rp = row_pair(a, static_cast<int64_t>(blockIdx.x) * kWarps + warp);
  const bool writes_normed = a.normed && blockIdx.x == 0 && warp == 0;
  if (!rp.any && !writes_normed) return; // no barrier below
  const int K = a.in_features;
  const float offset = a.norm_offset ? 1.f : 0.f;
  const VectorRange all{0, K / V}; // every warp covers the whole reduction: no shared memory, no barrier
  for (int64_t t = begin + blockIdx.y; t < end; t += gridDim.y) {
    const float* x = a.x + t * a.x_row_stride;
    float acc[2] = {0.f, 0.f}, ss = 0.f;
    stream_row_pair<kSteps>(static_cast<const W*>(a.w), K, rp.row[0], rp.row[1], all,
                            [&](int v, const Raw (&wv)[2]) { norm_dot_step<W>(v, wv, x, a.norm_w, offset, acc, ss); });
    ss = warp_sum(ss);
    const float inv_rms = rsqrtf(ss / K + a.eps);
    const float p0 = warp_sum(acc[0]) * inv_rms, p1 = warp_sum(acc[1]) * inv_rms;
    if (lane == 0 && rp.any) store_outputs(a, t, rp, p0, p1);
    if (writes_normed) store_normed(a, t, x, inv_rms, offset, lane, 32);
  }
}

} // namespace norm_linear
} // namespace ninfer::cuda_plugin

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::norm_linear::kThreads)
    ninfer_norm_linear_gemv_warp_t1_f32(ninfer_norm_linear_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::norm_linear::run<float>(a, b, e);
}
extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::norm_linear::kThreads)
    ninfer_norm_linear_gemv_warp_t1_bf16(ninfer_norm_linear_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::norm_linear::run<__nv_bfloat16>(a, b, e);
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

struct NormLinearDef : norm_linear::DefBase<norm_linear::kWarps> {
  static constexpr const char* name = "gemv_warp_t1";
  static constexpr int threads = norm_linear::kThreads;
  static KernelPair kernels() {
    return {"ninfer_norm_linear_gemv_warp_t1_f32", reinterpret_cast<const void*>(ninfer_norm_linear_gemv_warp_t1_f32), "ninfer_norm_linear_gemv_warp_t1_bf16",
            reinterpret_cast<const void*>(ninfer_norm_linear_gemv_warp_t1_bf16)};
  }
};

} // namespace

int32_t register_norm_linear_gemv_warp(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<NormLinearDef>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
