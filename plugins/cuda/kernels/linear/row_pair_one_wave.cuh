// The weight stream of the one-wave decode GEMVs (linear's and norm_linear's gemv_4warps_one_wave):
// a grid of at most the device's resident CTAs whose CTAs walk row blocks b = blockIdx.x,
// b + gridDim.x, ..., each warp streaming its slice of two weight rows per block with the next
// batch of loads always in flight while the current one is used, across block boundaries too.
//
// Why (experiments/gemv-probe CHAIN=1, H200, 36 Qwen3-8B layers of q|k|v, o, gate|up and down in
// one graph of PDL launches): the multi-wave GEMVs the decode step ran (gemv_warp_t1 for the first
// projections, gemv_4warps for the others) took 117.7 us per layer, 77% of the copy rate, although
// each streams at 82-102% behind launches of its own kind. One wave with two batches in flight
// took 99.6 us (92%), and 97.3 us (94%) with the first batch issued before the launch wait.
// A multi-wave grid triggers its dependent launch only once its last wave has started, and each
// wave's CTAs start with an empty pipe; a single wave keeps every lane's loads in flight from the
// first cycle to its last row block (docs/performance.md).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "linear/row_pair_stream.cuh"
#include "linear/weight_vec.cuh"

namespace ninfer::cuda_plugin {

// This warp's walk over the CTA's row blocks b = blockIdx.x, b + gridDim.x, ... < blocks (a
// dynamic order, CTAs taking blocks from a ticket counter so that CTAs starting late take fewer,
// measured slower in the Qwen3-8B's decode step: docs/performance.md).
// rows(b, r) gives weight row r (0 or 1) of this warp in block b (in range: a clamped row is
// computed and never stored by the caller). Vectors `range` of both rows are streamed lane-strided,
// kSteps loads per row per batch; a batch is issued before the previous one is used. The first
// batch is issued before wait() is called, so wait() may be the launch wait
// (common/grid_dependency.cuh: the weights are never written by a step). step(v, wv) runs for every
// vector v of the warp's range in order (wv[r]: row r's 16 bytes); done(b) after block b's last
// vector, by every warp of the CTA the same number of times (a place for barriers).
template <int kSteps, class W, class Rows, class Wait, class Step, class Done>
__device__ __forceinline__ void stream_row_pair_blocks(const W* w, int K, int blocks, VectorRange range, Rows rows,
                                                       Wait&& wait, Step&& step, Done&& done) {
  using Raw = typename WVec<W>::raw;
  const int lane = threadIdx.x & 31;
  Raw ahead[kSteps][2];
  const auto issue = [&](int b, int s0) {
    const Raw* r0 = reinterpret_cast<const Raw*>(w + rows(b, 0) * K);
    const Raw* r1 = reinterpret_cast<const Raw*>(w + rows(b, 1) * K);
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      const int s = s0 + 32 * u;
      ahead[u][0] = s < range.end ? __ldg(r0 + s) : Raw{};
      ahead[u][1] = s < range.end ? __ldg(r1 + s) : Raw{};
    }
  };
  int b = blockIdx.x;
  if (b < blocks) issue(b, range.begin + lane);
  wait();
  for (; b < blocks; b += gridDim.x) {
    for (int s0 = range.begin + lane; s0 < range.end; s0 += 32 * kSteps) {
      Raw cur[kSteps][2];
#pragma unroll
      for (int u = 0; u < kSteps; ++u) cur[u][0] = ahead[u][0], cur[u][1] = ahead[u][1];
      if (s0 + 32 * kSteps < range.end) issue(b, s0 + 32 * kSteps);
      else if (b + static_cast<int>(gridDim.x) < blocks) issue(b + gridDim.x, range.begin + lane);
#pragma unroll
      for (int u = 0; u < kSteps; ++u) {
        const int v = s0 + 32 * u;
        if (v >= range.end) break;
        step(v, cur[u]);
      }
    }
    done(b);
  }
}

} // namespace ninfer::cuda_plugin
