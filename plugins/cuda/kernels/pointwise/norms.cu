// Row norms: rms_norm (plain and (1+w), optional fused residual add, per-head rows with
// strides), gated_rms_norm and l2_norm. Contracts in ninfer/abi/ops/.
//
// One CTA normalises all rows of a token (grid-stride over the launch's tokens). The rows of a
// token are dealt to "teams" of threads, as many rows at once as the CTA has warps (rounded to
// a power of two): a single hidden-size row is reduced by the whole CTA, per-head rows by one
// warp each, smaller rows by teams of down to 8 threads. In the rows_in_registers kernels, rows
// of up to kRegs elements per team thread (8192 for a 512-thread CTA) are read once into
// registers, every load of the row (and of its weights) in flight together: at one token per
// step these kernels are pure latency, and one memory round trip instead of three shows (H200,
// Qwen3-8B decode +3%). Otherwise rows are read twice (sum of squares, then scale; the second
// read hits L1), with few registers so that prompts keep several CTAs per SM.
// Each thread touches the same elements in every pass, so in-place calls (y = x) and the
// residual write-back are safe without further synchronisation.
#include <cuda_runtime.h>

#include "ninfer/abi/ops/gated_rms_norm.h"
#include "ninfer/abi/ops/l2_norm.h"
#include "ninfer/abi/ops/rms_norm.h"
#include "common/pointwise_math.cuh"
#include "common/grid_dependency.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include "../../cuda_variant.hpp"
#include "pointwise/families.hpp"
#include "common/token_variant.cuh"
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

template <bool kInRegisters>
__device__ void rms_norm_rows(const ninfer_rms_norm_args& a, int64_t begin, int64_t end) {
  __shared__ float red[32];
  const Teams tm = make_teams(a.groups, a.dim);
  const float offset = a.weight_offset ? 1.f : 0.f;
  for (int64_t t = begin + blockIdx.x; t < end; t += gridDim.x) {
    for (int j0 = 0; j0 < a.groups; j0 += tm.count) {
      const int j = j0 + tm.index;
      const bool active = j < a.groups;
      const float* x = a.x + t * a.x_token_stride + j * a.x_group_stride;
      float* y = a.y + t * a.y_token_stride + j * a.y_group_stride;
      float* res = a.residual ? a.residual + t * a.residual_token_stride + j * a.residual_group_stride : nullptr;
      if (kInRegisters && a.dim <= tm.size * kRegs) {
        float v[kRegs] = {}, w[kRegs] = {};
        for_each_reg(active, a.dim, tm, [&](int u, int i) {
          v[u] = res ? x[i] + res[i] : x[i];
          w[u] = offset + a.weight[i];
        });
        if (res) for_each_reg(active, a.dim, tm, [&](int u, int i) { res[i] = v[u]; });
        const float inv = rsqrtf(team_sum(sum_squares(v), tm, red) / a.dim + a.eps);
        for_each_reg(active, a.dim, tm, [&](int u, int i) { y[i] = v[u] * inv * w[u]; });
        continue;
      }
      const float ss = team_sum_squares(active, a.dim, tm, [&](int i) {
        if (!res) return x[i];
        const float s = x[i] + res[i];
        res[i] = s;
        return s;
      });
      const float inv = rsqrtf(team_sum(ss, tm, red) / a.dim + a.eps);
      if (!active) continue;
      const float* s = res ? res : x;
      for (int i = tm.rank; i < a.dim; i += tm.size) y[i] = s[i] * inv * (offset + a.weight[i]);
    }
  }
}

template <bool kInRegisters>
__device__ void gated_rms_norm_rows(const ninfer_gated_rms_norm_args& a, int64_t begin, int64_t end) {
  __shared__ float red[32];
  const Teams tm = make_teams(a.heads, a.dim);
  for (int64_t t = begin + blockIdx.x; t < end; t += gridDim.x) {
    for (int h0 = 0; h0 < a.heads; h0 += tm.count) {
      const int h = h0 + tm.index;
      const bool active = h < a.heads;
      const int64_t row = static_cast<int64_t>(h) * a.dim;
      const float* x = a.x + t * a.x_token_stride + row;
      const float* z = a.z + t * a.z_token_stride + row;
      float* y = a.y + t * a.y_token_stride + row;
      if (kInRegisters && a.dim <= tm.size * kRegs) {
        float v[kRegs] = {}, w[kRegs] = {}, g[kRegs] = {};
        for_each_reg(active, a.dim, tm, [&](int u, int i) {
          v[u] = x[i];
          w[u] = a.weight[i];
          g[u] = z[i];
        });
        const float inv = rsqrtf(team_sum(sum_squares(v), tm, red) / a.dim + a.eps);
        for_each_reg(active, a.dim, tm, [&](int u, int i) { y[i] = v[u] * inv * w[u] * silu(g[u]); });
        continue;
      }
      const float ss = team_sum_squares(active, a.dim, tm, [&](int i) { return x[i]; });
      const float inv = rsqrtf(team_sum(ss, tm, red) / a.dim + a.eps);
      if (!active) continue;
      for (int i = tm.rank; i < a.dim; i += tm.size) y[i] = x[i] * inv * a.weight[i] * silu(z[i]);
    }
  }
}

template <bool kInRegisters>
__device__ void l2_norm_rows(const ninfer_l2_norm_args& a, int64_t begin, int64_t end) {
  __shared__ float red[32];
  const Teams tm = make_teams(a.heads, a.dim);
  for (int64_t t = begin + blockIdx.x; t < end; t += gridDim.x) {
    for (int h0 = 0; h0 < a.heads; h0 += tm.count) {
      const int h = h0 + tm.index;
      const bool active = h < a.heads;
      float* x = a.x + t * a.token_stride + h * a.head_stride;
      if (kInRegisters && a.dim <= tm.size * kRegs) {
        float v[kRegs] = {};
        for_each_reg(active, a.dim, tm, [&](int u, int i) { v[u] = x[i]; });
        const float inv = rsqrtf(team_sum(sum_squares(v), tm, red) + a.eps);
        for_each_reg(active, a.dim, tm, [&](int u, int i) { x[i] = v[u] * inv; });
        continue;
      }
      const float ss = team_sum_squares(active, a.dim, tm, [&](int i) { return x[i]; });
      const float inv = rsqrtf(team_sum(ss, tm, red) + a.eps);
      if (!active) continue;
      for (int i = tm.rank; i < a.dim; i += tm.size) x[i] *= inv;
    }
  }
}

} // namespace
} // namespace ninfer::cuda_plugin

// Two kernels per norm: the two-pass one ("rows": few registers, several CTAs per SM, for
// prompts, where many tokens are in flight per SM anyway) and the one-read one
// ("rows_in_registers": ~100 registers, one CTA per SM, for decode, where one token's latency
// is the whole cost). The built-in schedule tables route up to 64 tokens to the second.
#define NINFER_NORM_KERNELS(OP, ARGS)                                                           \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kNormThreads)               \
      ninfer_##OP##_f32(ARGS a, int64_t b, int64_t e) {                                         \
    ninfer::cuda_plugin::grid_dependency_prologue();                                            \
    ninfer::cuda_plugin::OP##_rows<false>(a, b, e);                                             \
  }                                                                                             \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kNormThreads)               \
      ninfer_##OP##_in_registers_f32(ARGS a, int64_t b, int64_t e) {                            \
    ninfer::cuda_plugin::grid_dependency_prologue();                                            \
    ninfer::cuda_plugin::OP##_rows<true>(a, b, e);                                              \
  }
NINFER_NORM_KERNELS(rms_norm, ninfer_rms_norm_args)
NINFER_NORM_KERNELS(gated_rms_norm, ninfer_gated_rms_norm_args)
NINFER_NORM_KERNELS(l2_norm, ninfer_l2_norm_args)

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

// What the three norm variants share: one token per CTA, grid-stride, float32 only.
struct NormDefBase : TokenDefDefaults {
  static constexpr const char* name = "rows";
  static constexpr int threads = kNormThreads;
  static int32_t supports(const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0; }
};

template <bool kInRegisters>
struct NormForm : NormDefBase {
  static constexpr const char* name = kInRegisters ? "rows_in_registers" : "rows";
};

template <bool R>
struct RmsNormDef : NormForm<R> {
  using Args = ninfer_rms_norm_args;
  static constexpr const char* op = NINFER_OP_RMS_NORM;
  static KernelPair kernels() {
    return R ? KernelPair{"ninfer_rms_norm_in_registers_f32", reinterpret_cast<const void*>(ninfer_rms_norm_in_registers_f32)}
             : KernelPair{"ninfer_rms_norm_f32", reinterpret_cast<const void*>(ninfer_rms_norm_f32)};
  }
};

template <bool R>
struct GatedRmsNormDef : NormForm<R> {
  using Args = ninfer_gated_rms_norm_args;
  static constexpr const char* op = NINFER_OP_GATED_RMS_NORM;
  static KernelPair kernels() {
    return R ? KernelPair{"ninfer_gated_rms_norm_in_registers_f32",
                          reinterpret_cast<const void*>(ninfer_gated_rms_norm_in_registers_f32)}
             : KernelPair{"ninfer_gated_rms_norm_f32", reinterpret_cast<const void*>(ninfer_gated_rms_norm_f32)};
  }
};

template <bool R>
struct L2NormDef : NormForm<R> {
  using Args = ninfer_l2_norm_args;
  static constexpr const char* op = NINFER_OP_L2_NORM;
  static KernelPair kernels() {
    return R ? KernelPair{"ninfer_l2_norm_in_registers_f32", reinterpret_cast<const void*>(ninfer_l2_norm_in_registers_f32)}
             : KernelPair{"ninfer_l2_norm_f32", reinterpret_cast<const void*>(ninfer_l2_norm_f32)};
  }
};

} // namespace

int32_t register_norms(const ninfer_registrar* r, char* err, size_t err_len) {
  // "rows" first: without a schedule table the planner keeps it (more CTAs per SM).
  return add_token_variants<RmsNormDef<false>, GatedRmsNormDef<false>, L2NormDef<false>, RmsNormDef<true>,
                            GatedRmsNormDef<true>, L2NormDef<true>>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
