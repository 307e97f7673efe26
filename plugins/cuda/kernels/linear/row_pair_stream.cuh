// The weight stream of the one-token CUDA-core GEMVs in which a warp owns two weight rows
// (linear's gemv_4warps, norm_linear's gemv_warp_t1 and gemv_4warps): one copy of the loop, so a
// change to how W is loaded reaches every kernel that streams it this way.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "linear/weight_vec.cuh"

namespace ninfer::cuda_plugin {

// The split layout of the one-token GEMVs whose row pairs' reductions are cut four ways (linear's
// and norm_linear's gemv_4warps and gemv_4warps_one_wave): 256 threads = 8 warps = 2 row groups x 4
// slices, each lane keeping two 16-byte loads per row in flight.
namespace split4 {
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kSlices = 4;                // warps sharing one row pair
constexpr int kGroups = kWarps / kSlices; // row pairs per CTA (gemv_4warps_one_wave: per row block)
constexpr int kSteps = 2;                 // 16-byte loads per row per lane and batch
} // namespace split4

// acc[r] += row r's 16-byte vector wv[r] (V elements) times x's elements x_at(0..V-1), as
// float32 FMAs in element order.
template <class W, class XAt>
__device__ __forceinline__ void dot2_step(const typename WVec<W>::raw (&wv)[2], XAt&& x_at, float (&acc)[2]) {
  constexpr int V = WVec<W>::n;
  float xv[V], w0[V], w1[V];
#pragma unroll
  for (int i = 0; i < V; i += 4) {
    const float4 q = x_at(i);
    xv[i] = q.x, xv[i + 1] = q.y, xv[i + 2] = q.z, xv[i + 3] = q.w;
  }
  WVec<W>::widen(wv[0], w0);
  WVec<W>::widen(wv[1], w1);
#pragma unroll
  for (int i = 0; i < V; ++i) {
    acc[0] = fmaf(w0[i], xv[i], acc[0]);
    acc[1] = fmaf(w1[i], xv[i], acc[1]);
  }
}

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
// `ready()` runs once, after the first batch's loads are issued and before its first step (or at
// the end when the lane has no vectors): a kernel's launch wait goes there, so that its first
// weights stream while the previous kernel finishes. NoReady (the kernels that wait first) leaves
// the loop exactly as it was before the hook: with a flag that is merely dead, nvcc still
// reshaped the float32 loop of gemv_4warps.
struct NoReady {
  __device__ void operator()() const {}
};
// Whether a `ready` argument is a hook (not NoReady). A trait of its own: cuda-generic's NVRTC
// <type_traits> has no std::decay_t; `ready` is taken by value, so its type is never a reference.
template <class R>
struct IsReadyHook {
  static constexpr bool value = true;
};
template <>
struct IsReadyHook<NoReady> {
  static constexpr bool value = false;
};
template <int kSteps, class W, class Step, class Ready>
__device__ __forceinline__ void stream_row_pair(const W* w, int K, int64_t row0, int64_t row1, VectorRange range,
                                                Step&& step, Ready ready) {
  using Raw = typename WVec<W>::raw;
  const int lane = threadIdx.x & 31;
  const Raw* rows[2] = {reinterpret_cast<const Raw*>(w + row0 * K), reinterpret_cast<const Raw*>(w + row1 * K)};
  constexpr bool kHook = IsReadyHook<Ready>::value;
  bool waited = false;
  for (int s0 = range.begin + lane; s0 < range.end; s0 += 32 * kSteps) {
    Raw wv[kSteps][2];
#pragma unroll
    for (int u = 0; u < kSteps; ++u)
#pragma unroll
      for (int r = 0; r < 2; ++r) wv[u][r] = s0 + 32 * u < range.end ? __ldg(rows[r] + s0 + 32 * u) : Raw{};
    if constexpr (kHook)
      if (!waited) ready(), waited = true;
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      const int v = s0 + 32 * u;
      if (v >= range.end) break;
      step(v, wv[u]);
    }
  }
  if constexpr (kHook)
    if (!waited) ready();
}
template <int kSteps, class W, class Step>
__device__ __forceinline__ void stream_row_pair(const W* w, int K, int64_t row0, int64_t row1, VectorRange range,
                                                Step&& step) {
  stream_row_pair<kSteps>(w, K, row0, row1, range, step, NoReady{});
}

} // namespace ninfer::cuda_plugin
