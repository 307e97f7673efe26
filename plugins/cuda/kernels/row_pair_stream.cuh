// The weight stream of the one-token CUDA-core GEMVs in which a warp owns two weight rows
// (linear's gemv_k4, norm_linear's gemv_cc1 and gemv_k4): one copy of the loop, so a change to
// how W is loaded reaches every kernel that streams it this way.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "weight_vec.cuh"

namespace ninfer::cuda_plugin {

// A warp's share [begin, end) of a row's 16-byte vectors.
struct VectorRange {
  int begin, end;
};

// Slice `slice` of `slices` contiguous, equally long ones (the last ones shorter or empty when
// `vectors` does not divide): the split kernels' reduction slices.
__device__ __forceinline__ VectorRange slice_range(int vectors, int slice, int slices) {
  const int per_slice = (vectors + slices - 1) / slices;
  const int begin = min(vectors, slice * per_slice);
  return {begin, min(vectors, begin + per_slice)};
}

// Streams vectors `range` of weight rows row0 and row1 (K elements each, 16-byte aligned),
// lane-strided: each lane issues kSteps loads per row before it uses the first (the loads depend
// on nothing but their address, so 2 x kSteps x 16 bytes per lane are in flight), then calls
// step(v, wv) for each of its vectors v in order, wv[r] holding row r's 16 bytes.
template <int kSteps, class W, class Step>
__device__ __forceinline__ void stream_row_pair(const W* w, int K, int64_t row0, int64_t row1, VectorRange range,
                                                Step&& step) {
  using Raw = typename WVec<W>::raw;
  const int lane = threadIdx.x & 31;
  const Raw* rows[2] = {reinterpret_cast<const Raw*>(w + row0 * K), reinterpret_cast<const Raw*>(w + row1 * K)};
  for (int s0 = range.begin + lane; s0 < range.end; s0 += 32 * kSteps) {
    Raw wv[kSteps][2];
#pragma unroll
    for (int u = 0; u < kSteps; ++u)
#pragma unroll
      for (int r = 0; r < 2; ++r) wv[u][r] = s0 + 32 * u < range.end ? __ldg(rows[r] + s0 + 32 * u) : Raw{};
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      const int v = s0 + 32 * u;
      if (v >= range.end) break;
      step(v, wv[u]);
    }
  }
}

} // namespace ninfer::cuda_plugin
