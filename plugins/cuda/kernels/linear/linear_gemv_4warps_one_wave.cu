// linear for one token in one wave: `gemv_4warps_one_wave` (contract: ninfer/abi/ops/linear.h).
// gemv_4warps's layout (256 threads = 2 row pairs x 4 reduction slices, partial sums added in
// shared memory in slice order, so results are deterministic and bit-identical to gemv_4warps's) on
// the one-wave pipelined stream of linear/row_pair_one_wave.cuh: the grid is at most the device's
// resident CTAs, each CTA walks row blocks in turn, and every lane keeps its next batch of weight
// loads in flight, the first one issued before the launch wait. Why one wave:
// linear/row_pair_one_wave.cuh.
#include <cuda_runtime.h>

#include <cstdint>

#include "common/grid_dependency.cuh"
#include "ninfer/abi/ops/linear.h"
#include "common/pointwise_math.cuh"
#include "linear/row_pair_one_wave.cuh"
#include "linear/weight_vec.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include "../../cuda_variant.hpp"
#include "linear/variants.hpp"
#include "common/token_variant.cuh"
#endif

namespace ninfer::cuda_plugin::gemv_4warps_one_wave {

using namespace split4; // the layout (linear/row_pair_stream.cuh)
constexpr int kOutputsPerBlock = 2 * kGroups;

// One token (the variant takes one; the launch's range is walked in order, only the first
// token's first batch going out before the launch wait).
template <class W>
__device__ void run(const ninfer_linear_args& a, int64_t begin, int64_t end) {
  constexpr int V = WVec<W>::n;
  using Raw = typename WVec<W>::raw;
  __shared__ float partial[kWarps][2];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, group = warp / kSlices;
  const int K = a.in_features;
  const int blocks = (a.out_features + kOutputsPerBlock - 1) / kOutputsPerBlock;
  const int64_t last = a.out_features - 1; // rows past it are clamped: computed, never stored
  const auto first_out = [&](int b) { return (static_cast<int64_t>(b) * kGroups + group) * 2; };
  const auto rows = [&](int b, int r) { return min(first_out(b) + r, last); };
  const VectorRange range = slice_range(K / V, warp % kSlices, kSlices);
  for (int64_t t = begin; t < end; ++t) {
    const float* x = a.x + t * a.x_row_stride;
    float acc[2] = {0.f, 0.f};
    stream_row_pair_blocks<kSteps>(
        static_cast<const W*>(a.w), K, blocks, range, rows,
        [&] {
          if (t == begin) grid_dependency_prologue();
        },
        [&](int v, const Raw (&wv)[2]) {
          dot2_step<W>(wv, [&](int i) { return __ldg(reinterpret_cast<const float4*>(x + v * V + i)); }, acc);
        },
        [&](int b) {
          const float s0 = warp_sum(acc[0]), s1 = warp_sum(acc[1]);
          acc[0] = acc[1] = 0.f;
          if (lane == 0) partial[warp][0] = s0, partial[warp][1] = s1;
          __syncthreads();
          const int64_t out = first_out(b);
          if (warp % kSlices == 0 && lane < 2 && out + lane < a.out_features) {
            float v = 0.f;
#pragma unroll
            for (int j = 0; j < kSlices; ++j) v += partial[warp + j][lane];
            float* y = a.y + t * a.y_row_stride + out + lane;
            *y = a.accumulate ? *y + v : v; // one thread per element: updating y in place is safe
          }
          __syncthreads(); // partial is rewritten for the next block
        });
  }
  if (begin >= end) grid_dependency_prologue(); // an empty range still waits before it ends
}

} // namespace ninfer::cuda_plugin::gemv_4warps_one_wave

// No prologue first: the pipeline calls it after issuing the first weight loads.
extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::gemv_4warps_one_wave::kThreads)
    ninfer_linear_gemv_4warps_one_wave_f32(ninfer_linear_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::gemv_4warps_one_wave::run<float>(a, b, e);
}
extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::gemv_4warps_one_wave::kThreads)
    ninfer_linear_gemv_4warps_one_wave_bf16(ninfer_linear_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::gemv_4warps_one_wave::run<__nv_bfloat16>(a, b, e);
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

struct Gemv4WarpsOneWaveDef : OneTokenVectorLinearDef {
  static constexpr const char* name = "gemv_4warps_one_wave";
  static constexpr int threads = gemv_4warps_one_wave::kThreads;
  static KernelPair kernels() {
    return {"ninfer_linear_gemv_4warps_one_wave_f32", reinterpret_cast<const void*>(ninfer_linear_gemv_4warps_one_wave_f32),
            "ninfer_linear_gemv_4warps_one_wave_bf16", reinterpret_cast<const void*>(ninfer_linear_gemv_4warps_one_wave_bf16)};
  }
  // One wave: the row blocks, at most as many CTAs as the device holds at once.
  static dim3 grid(const Args& a, const ninfer_launch&) {
    const TokenKernel k = a.w_dtype == NINFER_DTYPE_BF16 ? kernels().bf16 : kernels().f32;
    return one_wave_grid(k, gemv_4warps_one_wave::kThreads, 0, a.out_features, gemv_4warps_one_wave::kOutputsPerBlock);
  }
};

} // namespace

int32_t register_linear_gemv_4warps_one_wave(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<Gemv4WarpsOneWaveDef>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
