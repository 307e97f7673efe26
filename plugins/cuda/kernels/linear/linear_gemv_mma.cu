// linear, decode-sized: GEMV-style kernels that stream the weight matrix once per tile of TPC
// tokens (contract: ninfer/abi/ops/linear.h). Each variant gemv_mma_t<TPC> has two kernels:
//
// bf16 weights with 16-byte rows (every model shape): linear/linear_gemv_mma_bf16.cuh, tensor-core
// MMAs on W as loaded, x split into bf16 hi + lo so the result keeps float32 accuracy, split-K
// across the CTA's warps. What decode speed rests on.
//
// float32 weights, and bf16 rows that are not 16-byte vectors (in_features % 8 != 0), take the
// CUDA-core kernel below:
//   - a CTA of kWarps warps owns kWarps * R consecutive weight rows (grid.x covers out_features,
//     a number that follows from the shape alone) and one tile of TPC tokens (grid.y strides
//     over the planner's token tiles);
//   - the tile's x rows are staged in shared memory (in chunks of the reduction when they do
//     not fit) and reused by every warp, so W is the only stream from DRAM;
//   - each lane issues R * U independent 16-byte loads of W before using any of them;
//   - accumulation is float32, per (row, token), reduced across the warp at the end; with
//     a.accumulate lane 0 then adds y's previous value in the store.
// bf16 lanes read their two 16-byte halves of x in an order that alternates every four lanes,
// which keeps the shared-memory reads free of bank conflicts.
// A row of W that is not 16-byte aligned (in_features not a multiple of 8 bf16 / 4 f32) takes
// a scalar path: correct for any shape, fast for the shapes models have.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "linear/linear_gemv_mma_bf16.cuh"
#include "linear/weight_vec.cuh"
#include "ninfer/abi/ops/linear.h"
#include "common/pointwise_math.cuh"
#include "common/grid_dependency.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include "../../cuda_variant.hpp"
#include "linear/variants.hpp"
#include "common/token_variant.cuh"
#endif

namespace ninfer::cuda_plugin {
namespace {

constexpr int kGemvThreads = 256;
constexpr int kWarps = kGemvThreads / 32;
// Shared memory for the staged x chunk: TPC x chunk floats, at most 48 KiB (the chunk shrinks
// as TPC grows), a multiple of one warp step (32 lanes x 8 elements).
constexpr int kXChunkFloats = 12 * 1024;
constexpr int kWarpStep = 256;

__host__ __device__ constexpr int x_chunk(int in_features, int tpc) {
  const int cap = kXChunkFloats / tpc / kWarpStep * kWarpStep;
  const int need = (in_features + kWarpStep - 1) / kWarpStep * kWarpStep;
  return need < cap ? need : cap;
}

// x[t][s*n .. s*n+n) from the staged chunk (row pitch kc floats).
template <class W>
__device__ __forceinline__ void load_x(const float* xs, int kc, int t, int s, int lane, float (&f)[WVec<W>::n]) {
  const float4* p = reinterpret_cast<const float4*>(xs + t * kc + s * WVec<W>::n);
  if constexpr (WVec<W>::n == 4) {
    const float4 v = p[0];
    f[0] = v.x, f[1] = v.y, f[2] = v.z, f[3] = v.w;
  } else {
    const int sw = (lane >> 2) & 1; // alternate which half is read first: no bank conflicts
    const float4 first = p[sw], second = p[1 - sw];
    const float4 lo = sw ? second : first, hi = sw ? first : second;
    f[0] = lo.x, f[1] = lo.y, f[2] = lo.z, f[3] = lo.w;
    f[4] = hi.x, f[5] = hi.y, f[6] = hi.z, f[7] = hi.w;
  }
}

// acc[r][t] += W[rows[r], k0 .. k0+klen) . x[t][0 .. klen), 16-byte loads (klen % n == 0).
template <class W, int TPC, int R, int U>
__device__ __forceinline__ void accumulate_vec(const W* const (&rows)[R], int k0, int klen, const float* xs, int kc,
                                               int lane, float (&acc)[R][TPC]) {
  using V = WVec<W>;
  const int steps = klen / V::n;
  for (int s0 = lane; s0 < steps; s0 += 32 * U) {
    typename V::raw wv[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int s = s0 + 32 * u;
#pragma unroll
      for (int r = 0; r < R; ++r)
        wv[u][r] = s < steps ? __ldg(reinterpret_cast<const typename V::raw*>(rows[r] + k0) + s) : typename V::raw{};
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int s = s0 + 32 * u;
      if (s >= steps) break;
      float wf[R][V::n];
#pragma unroll
      for (int r = 0; r < R; ++r) V::widen(wv[u][r], wf[r]);
#pragma unroll
      for (int t = 0; t < TPC; ++t) {
        float xf[V::n];
        load_x<W>(xs, kc, t, s, lane, xf);
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int i = 0; i < V::n; ++i) acc[r][t] = fmaf(xf[i], wf[r][i], acc[r][t]);
      }
    }
  }
}

// The same product one element per lane: any alignment, any in_features.
template <class W, int TPC, int R>
__device__ __forceinline__ void accumulate_scalar(const W* const (&rows)[R], int k0, int klen, const float* xs,
                                                  int kc, int lane, float (&acc)[R][TPC]) {
  for (int k = lane; k < klen; k += 32) {
    float wf[R];
#pragma unroll
    for (int r = 0; r < R; ++r) wf[r] = to_float(rows[r][k0 + k]);
#pragma unroll
    for (int t = 0; t < TPC; ++t) {
      const float xv = xs[t * kc + k];
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r][t] = fmaf(xv, wf[r], acc[r][t]);
    }
  }
}

template <class W, int TPC, int R, int U>
__device__ void linear_gemv(const ninfer_linear_args& a, int64_t begin, int64_t end) {
  extern __shared__ __align__(16) float xs[]; // [TPC][kc]
  const int K = a.in_features, N = a.out_features;
  const int kc = x_chunk(K, TPC);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t n0 = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * R;
  const W* w = static_cast<const W*>(a.w);
  const W* rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) rows[r] = w + min(n0 + r, static_cast<int64_t>(N) - 1) * K; // clamp: never stored
  const bool warp_has_rows = n0 < N;
  const bool vec = K % WVec<W>::n == 0 && reinterpret_cast<uintptr_t>(a.w) % 16 == 0;
  const int64_t tiles = (end - begin + TPC - 1) / TPC;
  for (int64_t tile = blockIdx.y; tile < tiles; tile += gridDim.y) {
    const int64_t t0 = begin + tile * TPC;
    const int nt = static_cast<int>(min(static_cast<int64_t>(TPC), end - t0));
    float acc[R][TPC];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int t = 0; t < TPC; ++t) acc[r][t] = 0.f;
    for (int k0 = 0; k0 < K; k0 += kc) {
      const int klen = min(kc, K - k0);
      __syncthreads(); // every warp is done with the previous chunk
      for (int i = threadIdx.x; i < TPC * kc; i += kGemvThreads) {
        const int t = i / kc, k = i % kc;
        xs[i] = t < nt && k < klen ? a.x[(t0 + t) * a.x_row_stride + k0 + k] : 0.f;
      }
      __syncthreads();
      if (!warp_has_rows) continue;
      if (vec)
        accumulate_vec<W, TPC, R, U>(rows, k0, klen, xs, kc, lane, acc);
      else
        accumulate_scalar<W, TPC, R>(rows, k0, klen, xs, kc, lane, acc);
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int t = 0; t < TPC; ++t) {
        const float v = warp_sum(acc[r][t]);
        if (lane == 0 && warp_has_rows && n0 + r < N && t < nt) {
          float* y = a.y + (t0 + t) * a.y_row_stride + n0 + r; // read and written by this lane only
          *y = a.accumulate ? *y + v : v;
        }
      }
  }
}

} // namespace
} // namespace ninfer::cuda_plugin

// Entry points: one per (tokens per CTA, weight dtype). R rows per warp and U loads in flight
// per row keep R * U = 4 sixteen-byte loads per lane outstanding; R grows with TPC so the
// shared-memory reads of x per byte of W stay within the SM's shared-memory bandwidth.
#define NINFER_GEMV(TPC, R, U)                                                                                  \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kGemvThreads)                              \
      ninfer_linear_gemv_mma_t##TPC##_f32(ninfer_linear_args a, int64_t b, int64_t e) {                               \
    ninfer::cuda_plugin::grid_dependency_prologue(); \
    ninfer::cuda_plugin::linear_gemv<float, TPC, R, U>(a, b, e);                                                \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kGemvThreads)                              \
      ninfer_linear_gemv_mma_t##TPC##_bf16(ninfer_linear_args a, int64_t b, int64_t e) {                              \
    ninfer::cuda_plugin::grid_dependency_prologue(); \
    ninfer::cuda_plugin::linear_gemv<__nv_bfloat16, TPC, R, U>(a, b, e);                                        \
  }

NINFER_GEMV(1, 1, 4)
NINFER_GEMV(2, 1, 4)
NINFER_GEMV(4, 2, 2)
NINFER_GEMV(8, 4, 1)

// The bf16 tensor-core kernels (linear/linear_gemv_mma_bf16.cuh): MR = 2 row tiles of 16 per warp,
// U = 4 k steps in flight, 16 sixteen-byte loads per lane (8 KiB per warp, ~128 KiB per SM at two
// CTAs per SM), at most 128 registers. Measured on the H200 against the alternatives
// (tests/gpu_ops/linear_bench.cu): one row tile with 4 steps in flight
// (77 registers, 3 CTAs/SM) reached 55-88% of the copy bandwidth at T = 1, one row tile with 8
// steps 45-79%, this one 55-98%; two row tiles also halve the x reads per byte of W.
#define NINFER_GEMV_MMA(TPC, MR, U)                                                                           \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::gemv_bf16::kThreads, 2)                   \
      ninfer_linear_gemv_mma_t##TPC##_bf16_mma(ninfer_linear_args a, int64_t b, int64_t e) {                        \
    ninfer::cuda_plugin::grid_dependency_prologue(); \
    ninfer::cuda_plugin::gemv_bf16::gemv<TPC, MR, U>(a, b, e);                                                \
  }                                                                                                           \
  namespace ninfer::cuda_plugin {                                                                             \
  inline constexpr int kGemv##TPC##MmaRows = MR;                                                              \
  }

NINFER_GEMV_MMA(1, 2, 4)
NINFER_GEMV_MMA(2, 2, 4)
NINFER_GEMV_MMA(4, 2, 4)
NINFER_GEMV_MMA(8, 2, 4)

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

// The tensor-core kernel runs when W is bf16 with 16-byte rows; the CUDA-core kernel otherwise.
inline bool uses_mma(int32_t w_dtype, int64_t in_features) {
  return w_dtype == NINFER_DTYPE_BF16 && in_features % 8 == 0;
}

template <int TPC, int R, int MR>
struct GemvDefBase : TokenDefDefaults {
  using Args = ninfer_linear_args;
  static constexpr const char* op = NINFER_OP_LINEAR;
  static constexpr int threads = kGemvThreads;
  static constexpr int tokens_per_cta = TPC;
  static constexpr int32_t geometry = NINFER_GEOMETRY_TOKEN_TILED;
  static constexpr uint32_t dtype_mask = kF32OrBf16Mask;
  static_assert(kGemvThreads == gemv_bf16::kThreads, "both kernels launch with the variant's block size");
  static int32_t dtype(const Args& a) { return a.w_dtype; }
  static int32_t supports(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0; }
  // The CUDA-core kernel stages x in dynamic shared memory; the tensor-core one needs none.
  static size_t dynamic_smem(const void*, const ninfer_shape* s) {
    if (uses_mma(s->dtype, s->dims[0])) return 0;
    return static_cast<size_t>(TPC) * x_chunk(static_cast<int>(s->dims[0]), TPC) * sizeof(float);
  }
  static const char* invalid(const Args& a, const ninfer_launch& l) {
    if (const char* why = linear_args_invalid(a, l, dynamic_smem)) return why;
    if (uses_mma(a.w_dtype, a.in_features) && reinterpret_cast<uintptr_t>(a.w) % 16 != 0)
      return "bf16 weights must be 16-byte aligned";
    return nullptr;
  }
  // grid.x: blocks of weight rows (a number from the shape alone); grid.y: the planner's token
  // tiles (the kernels stride over them when there are more than a grid dimension holds).
  static dim3 grid(const Args& a, const ninfer_launch& l) {
    if (uses_mma(a.w_dtype, a.in_features))
      return linear_grid(a.out_features, gemv_bf16::rows_per_cta(a.out_features, a.in_features, MR), l.grid_x);
    return linear_grid(a.out_features, kWarps * R, l.grid_x);
  }
};

#define NINFER_GEMV_DEF(TPC, R)                                                                            \
  struct Gemv##TPC##Def : GemvDefBase<TPC, R, kGemv##TPC##MmaRows> {                                       \
    static constexpr const char* name = "gemv_mma_t" #TPC;                                                       \
    static KernelPair kernels() {                                                                          \
      return {"ninfer_linear_gemv_mma_t" #TPC "_f32", reinterpret_cast<const void*>(ninfer_linear_gemv_mma_t##TPC##_f32), \
              "ninfer_linear_gemv_mma_t" #TPC "_bf16_mma",                                                       \
              reinterpret_cast<const void*>(ninfer_linear_gemv_mma_t##TPC##_bf16_mma)};                          \
    }                                                                                                      \
    static TokenKernel kernel(const Args& a) {                                                             \
      if (a.w_dtype == NINFER_DTYPE_BF16 && !uses_mma(a.w_dtype, a.in_features))                          \
        return reinterpret_cast<const void*>(ninfer_linear_gemv_mma_t##TPC##_bf16);                             \
      return nullptr; /* the pair's kernel for the dtype */                                                \
    }                                                                                                      \
  };
NINFER_GEMV_DEF(1, 1)
NINFER_GEMV_DEF(2, 1)
NINFER_GEMV_DEF(4, 2)
NINFER_GEMV_DEF(8, 4)

} // namespace

int32_t register_linear_gemv_mma(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<Gemv1Def, Gemv2Def, Gemv4Def, Gemv8Def>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
