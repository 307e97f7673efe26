// What the row norms share (rms_norm.cu, gated_rms_norm.cu, l2_norm.cu; contracts in
// ninfer/abi/ops/): how a token's rows are dealt to teams of threads, the team reductions, and
// the two kernel forms every norm has.
//
// One CTA normalises all rows of a token (grid-stride over the launch's tokens). The rows of a
// token are dealt to "teams" of threads, as many rows at once as the CTA has warps (rounded to
// a power of two): a single hidden-size row is reduced by the whole CTA, per-head rows by one
// warp each, smaller rows by teams of down to 8 threads. In the in_registers kernels, rows
// of up to kRegs elements per team thread (8192 for a 512-thread CTA) are read once into
// registers, every load of the row (and of its weights) in flight together: at one token per
// step these kernels are pure latency, and one memory round trip instead of three shows (H200,
// Qwen3-8B decode +3%). Otherwise rows are read twice (sum of squares, then scale; the second
// read hits L1), with few registers so that prompts keep several CTAs per SM.
// Each thread touches the same elements in every pass, so in-place calls (y = x) and the
// residual write-back are safe without further synchronisation.
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

constexpr int kNormThreads = 512;
// Loads each thread issues before using any of them: a row's latency is paid once, not per element.
constexpr int kBatch = 4;

struct Teams {
  int count; // rows processed at once
  int size;  // threads per row
  int index; // this thread's team
  int rank;  // this thread's place in its team
};

// Elements a thread keeps in registers on the one-read path.
constexpr int kRegs = 16;
// Smallest team: 8 threads reduce with three shuffles.
constexpr int kMinTeam = 8;

// Teams as large as possible while every row of the token is processed in the fewest rounds:
// each round costs a memory latency, so Qwen3.5-27B's 48 gated-norm heads of 128 take one
// round of 64 teams of 8 threads (16 elements each) rather than three rounds of 16 warps. A
// smaller team is taken only when its rows still fit its registers (kRegs per thread).
__device__ Teams make_teams(int rows, int dim) {
  const int threads = static_cast<int>(blockDim.x);
  int size = threads, rounds = rows;
  for (int s = threads / 2; s >= kMinTeam && dim <= s * kRegs; s /= 2) {
    const int r = (rows + threads / s - 1) / (threads / s);
    if (r < rounds) size = s, rounds = r;
  }
  return {threads / size, size, static_cast<int>(threadIdx.x) / size, static_cast<int>(threadIdx.x) % size};
}

// The sum of v over each team, in a fixed order (deterministic). Every thread of the CTA must
// call it: teams of a warp or more meet in shared memory (it synchronises the CTA), smaller
// ones reduce within their lanes.
__device__ float team_sum(float v, const Teams& tm, float* red) {
  if (tm.size < 32) {
    for (int off = tm.size / 2; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
  }
  v = warp_sum(v);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  const int warps_per_team = tm.size / 32;
  float s = 0.f;
  for (int w = 0; w < warps_per_team; ++w) s += red[tm.index * warps_per_team + w];
  __syncthreads(); // red is reused by the next row
  return s;
}

// f(u, i) for the thread's register slots u and row elements i = rank + u * team size < dim.
template <class F>
__device__ __forceinline__ void for_each_reg(bool active, int dim, const Teams& tm, F f) {
#pragma unroll
  for (int u = 0; u < kRegs; ++u) {
    const int i = tm.rank + u * tm.size;
    if (active && i < dim) f(u, i);
  }
}

__device__ __forceinline__ float sum_squares(const float (&v)[kRegs]) {
  float ss = 0.f;
#pragma unroll
  for (int u = 0; u < kRegs; ++u) ss += v[u] * v[u];
  return ss;
}

// Sum of squares of row[0, dim) over the team; `load(i)` yields element i (and may write back).
template <class Load>
__device__ float team_sum_squares(bool active, int dim, const Teams& tm, Load load) {
  float ss = 0.f;
  if (active) {
    for (int i0 = tm.rank; i0 < dim; i0 += tm.size * kBatch) {
      float v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = i0 + u * tm.size;
        v[u] = i < dim ? load(i) : 0.f;
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) ss += v[u] * v[u];
    }
  }
  return ss;
}

} // namespace
} // namespace ninfer::cuda_plugin

// Two kernels per norm: the two-pass one ("two_pass": few registers, several CTAs per SM, for
// prompts, where many tokens are in flight per SM anyway) and the one-read one
// ("in_registers": ~100 registers, one CTA per SM, for decode, where one token's latency
// is the whole cost). The built-in schedule tables route up to 64 tokens to the second; without
// a table the planner keeps the first registered, "two_pass" (more CTAs per SM).
#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

// What the three norm variants share: one token per CTA, grid-stride, float32 only.
struct NormDefBase : TokenDefDefaults {
  static constexpr int threads = kNormThreads;
  static int32_t supports(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0; }
};

template <bool kInRegisters>
struct NormForm : NormDefBase {
  static constexpr const char* name = kInRegisters ? "in_registers" : "two_pass";
};

} // namespace
} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
