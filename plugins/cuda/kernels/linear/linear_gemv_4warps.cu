// linear for one token with each row's reduction split across four warps: `gemv_4warps` (contract:
// ninfer/abi/ops/linear.h). The H200's table routes every one-token projection here (o_proj,
// down_proj, Gated DeltaNet out_proj, the LM head; the first projections run norm_linear).
//
// Why: a decode step is a chain of dependent GEMVs of 8-600 MB each. With a whole row per warp
// (gemv_warp_t1) a warp walks its 8-35 KB rows one memory round trip per 512 elements, so a short
// matrix is mostly ramp-up and round trips: the Qwen3-8B's o_proj (4096 x 4096) took 14 us, 56%
// of the copy rate. Split four ways, each warp's walk is a quarter as long and four times as many
// warps are in flight. In a graph of 32 dependent launches (experiments/gemv-probe) this design
// streamed every Qwen3-8B / Qwen3.5-27B projection at 81-104% of the copy rate against 56-90%
// for gemv_warp_t1 and 63-100% for cuBLASLt; in the decode step it is worth +3% (8B) and +5% (27B)
// tok/s over cuBLASLt (docs/performance.md).
//
// Layout: 256 threads = 8 warps = 2 row groups x 4 reduction slices. A group owns two weight rows
// (two outputs); slice j streams the j-th quarter of both rows, two 16-byte loads per row in flight
// per lane. The warps' partial sums meet in shared memory and are added in slice order, so results
// are deterministic (graph replay equals eager, bit for bit). No L2 prefetch before the launch
// wait: a variant that requested 1 KB of each warp's rows first decoded within +-0.5% of this
// one, and in a chain of GEMVs alone it cost time (experiments/gemv-probe).
//
// gemv_4warps_early_loads: the same kernel with the launch wait after each lane's first weight
// loads (into registers, not an L2 hint). H200 decode at batch 1 with every one-token linear on
// it: Qwen3-8B 242.0 / 225.4 -> 245.9 / 230.3 tok/s at context 0 / 4,096, but Qwen3.5-27B
// 77.8 / 75.4 -> 76.1 / 73.7. So the sm_90 table routes only the 8B's shapes to it
// (arch/schedules/sm_90.yaml; docs/performance.md).
#include <cuda_runtime.h>

#include <cstdint>

#include "common/grid_dependency.cuh"
#include "ninfer/abi/ops/linear.h"
#include "common/pointwise_math.cuh"
#include "linear/row_pair_stream.cuh"
#include "linear/weight_vec.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include "../../cuda_variant.hpp"
#include "linear/variants.hpp"
#include "common/token_variant.cuh"
#endif

namespace ninfer::cuda_plugin::gemv_4warps {

using namespace split4; // the layout (linear/row_pair_stream.cuh)
constexpr int kOutputsPerCta = 2 * kGroups;

// This warp's partial dot products of its slice of rows row0, row1 with x, summed over the warp.
// The launch guarantees in_features % 8 == 0 and 16-byte aligned x and w.
template <class W, class Ready>
__device__ __forceinline__ void slice_dot(const W* w, const float* __restrict__ x, int K, int64_t row0, int64_t row1,
                                          float (&acc)[2], Ready ready) {
  constexpr int V = WVec<W>::n; // elements per 16-byte vector
  using Raw = typename WVec<W>::raw;
  const VectorRange range = slice_range(K / V, (threadIdx.x >> 5) % kSlices, kSlices);
  stream_row_pair<kSteps>(
      w, K, row0, row1, range,
      [&](int v, const Raw (&wv)[2]) {
        dot2_step<W>(wv, [&](int i) { return __ldg(reinterpret_cast<const float4*>(x + v * V + i)); }, acc);
      },
      ready);
  acc[0] = warp_sum(acc[0]);
  acc[1] = warp_sum(acc[1]);
}

// kEarly (gemv_4warps_early_loads): the launch wait comes after each lane's first weight loads are
// issued, not first: weights are never written during a step (common/grid_dependency.cuh), so the
// first batch of every resident CTA streams while the previous kernel finishes (an attention
// launch's merge tail, a norm). x, y and everything else are read after the wait.
template <class W, bool kEarly>
__device__ void run(const ninfer_linear_args& a, int64_t begin, int64_t end) {
  if (!kEarly) grid_dependency_prologue();
  __shared__ float partial[kWarps][2];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, group = warp / kSlices;
  const int64_t out = (static_cast<int64_t>(blockIdx.x) * kGroups + group) * 2; // the group's first output
  const int64_t last = a.out_features - 1; // rows past it are clamped: computed, never stored
  const int64_t row0 = min(out, last), row1 = min(out + 1, last);
  bool waited = !kEarly;
  const auto wait_once = [&] {
    if (!waited) grid_dependency_prologue(), waited = true;
  };
  for (int64_t t = begin + blockIdx.y; t < end; t += gridDim.y) {
    float acc[2] = {0.f, 0.f};
    const W* const w = static_cast<const W*>(a.w);
    const float* const x = a.x + t * a.x_row_stride;
    if constexpr (kEarly)
      slice_dot(w, x, a.in_features, row0, row1, acc, wait_once);
    else // gemv_4warps: the stream without the hook, so its code is what it was before gemv_4warps_early_loads
      slice_dot(w, x, a.in_features, row0, row1, acc, NoReady{});
    if (lane == 0) partial[warp][0] = acc[0], partial[warp][1] = acc[1];
    __syncthreads();
    // Lanes 0 and 1 of the group's first warp add the slices and store one output each.
    if (warp % kSlices == 0 && lane < 2 && out + lane < a.out_features) {
      float v = 0.f;
#pragma unroll
      for (int j = 0; j < kSlices; ++j) v += partial[warp + j][lane];
      float* y = a.y + t * a.y_row_stride + out + lane;
      *y = a.accumulate ? *y + v : v; // one thread per element: updating y in place is safe
    }
    __syncthreads(); // partial is rewritten by the next token
  }
  wait_once(); // a CTA without tokens still waits (the prologue's rule)
}

} // namespace ninfer::cuda_plugin::gemv_4warps

#define NINFER_GEMV_4WARPS(NAME, EARLY)                                                                               \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::gemv_4warps::kThreads)                           \
      ninfer_linear_##NAME##_f32(ninfer_linear_args a, int64_t b, int64_t e) {                                   \
    ninfer::cuda_plugin::gemv_4warps::run<float, EARLY>(a, b, e);                                                     \
  }                                                                                                               \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::gemv_4warps::kThreads)                           \
      ninfer_linear_##NAME##_bf16(ninfer_linear_args a, int64_t b, int64_t e) {                                  \
    ninfer::cuda_plugin::gemv_4warps::run<__nv_bfloat16, EARLY>(a, b, e);                                             \
  }
NINFER_GEMV_4WARPS(gemv_4warps, false)
NINFER_GEMV_4WARPS(gemv_4warps_early_loads, true)

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

struct Gemv4WarpsDef : OneTokenVectorLinearDef {
  static constexpr const char* name = "gemv_4warps";
  static constexpr int threads = gemv_4warps::kThreads;
  static KernelPair kernels() {
    return {"ninfer_linear_gemv_4warps_f32", reinterpret_cast<const void*>(ninfer_linear_gemv_4warps_f32),
            "ninfer_linear_gemv_4warps_bf16", reinterpret_cast<const void*>(ninfer_linear_gemv_4warps_bf16)};
  }
  // grid.x: blocks of kOutputsPerCta outputs (from the shape alone); grid.y: the planner's token
  // tiles.
  static dim3 grid(const Args& a, const ninfer_launch& l) {
    return linear_grid(a.out_features, gemv_4warps::kOutputsPerCta, l.grid_x);
  }
};

struct Gemv4WarpsEarlyLoadsDef : Gemv4WarpsDef {
  static constexpr const char* name = "gemv_4warps_early_loads";
  static KernelPair kernels() {
    return {"ninfer_linear_gemv_4warps_early_loads_f32", reinterpret_cast<const void*>(ninfer_linear_gemv_4warps_early_loads_f32),
            "ninfer_linear_gemv_4warps_early_loads_bf16", reinterpret_cast<const void*>(ninfer_linear_gemv_4warps_early_loads_bf16)};
  }
};

} // namespace

int32_t register_linear_gemv_4warps(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<Gemv4WarpsDef, Gemv4WarpsEarlyLoadsDef>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
