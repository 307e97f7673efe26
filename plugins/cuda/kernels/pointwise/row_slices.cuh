// What the elementwise gates share (silu_mul.cu: the SwiGLU activation; sigmoid_gate.cu: the
// Qwen3.5 attention output gate, in place; contracts in ninfer/abi/ops/), variant "row_slices".
//
// A token's row is cut into kRowSlices slices, one CTA each (grid.y = split_k): a decode step
// has a single token, and one CTA per 17,408-wide MLP row would leave the GPU idle. Token tiles
// of one token are strided over grid.x. Each thread reads the elements it writes, so the
// in-place forms the contracts allow are safe.
#pragma once

#include <cuda_runtime.h>

#include "common/grid_dependency.cuh"
#include "common/pointwise_math.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include "../../cuda_variant.hpp"
#include "common/token_variant.cuh"
#include "pointwise/families.hpp"
#endif

namespace ninfer::cuda_plugin {
namespace {

constexpr int kThreads = 256;
constexpr int kRowSlices = 8;
constexpr int kBatch = 4; // loads in flight per thread before the first use

// This CTA's slice [lo, hi) of a row of n elements.
__device__ void row_slice(int64_t n, int64_t& lo, int64_t& hi) {
  const int64_t len = (n + gridDim.y - 1) / gridDim.y;
  lo = min(n, static_cast<int64_t>(blockIdx.y) * len);
  hi = min(n, lo + len);
}

} // namespace
} // namespace ninfer::cuda_plugin

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

// One token per tile, the row split over kRowSlices CTAs (the planner's grid.y = split_k).
struct SlicedRowsDefBase : TokenDefDefaults {
  static constexpr const char* name = "row_slices";
  static constexpr int threads = kThreads;
  static constexpr int split_k = kRowSlices;
};

} // namespace
} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
