// linear, prefill-sized: a tiled float32 matrix product (contract: ninfer/abi/ops/linear.h).
//
// A CTA of 256 threads computes a BM (tokens) x BN (outputs) tile of y. The reduction runs over
// k-tiles of BK: the tile's x rows and W rows are staged in shared memory k-major (bf16 weights
// widened to float32 on the way in), double-buffered so the global loads of the next k-tile are
// in flight while the current one is multiplied, with one barrier per k-tile. Each thread holds
// a TM x TN block of accumulators, made of 4 x 4 sub-blocks 64 apart so its shared-memory reads
// are float4-wide and conflict-free. Accumulation is float32 (plain FMA, no tensor cores: x is
// float32 and must stay so). grid.x covers out_features in tiles of BN (a number from the shape),
// grid.y the planner's token tiles of BM. Each element of y is stored by the one thread that
// holds its accumulator (which adds y's previous value first when a.accumulate is set).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

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

constexpr int kTiledThreads = 256;
constexpr int BK = 16;
constexpr int kPad = 4; // keeps float4 alignment, breaks the stride-BM bank pattern of the transposed stores

template <int TM, int TN>
struct TileShape {
  static constexpr int BM = 16 * TM, BN = 16 * TN;
  static constexpr int x_per_thread = BM * BK / kTiledThreads; // elements of x staged per thread per k-tile
  static constexpr int w_per_thread = BN * BK / kTiledThreads;
};

// Vector width (elements) of the loads that stage a run of n elements of T: at most 16 bytes.
template <class T, int n>
inline constexpr int kRunVec = n < 16 / static_cast<int>(sizeof(T)) ? n : 16 / static_cast<int>(sizeof(T));

// Loads elements [k, k+n) of row `row` of a row-major matrix (row pitch `pitch` elements) into
// v as float32, zero outside [0, rows) x [0, K). `aligned`: pitch and base allow vector loads
// of kRunVec<T, n> elements (k is always a multiple of n).
template <class T, int n>
__device__ __forceinline__ void load_run(const T* base, int64_t pitch, int64_t row, int64_t rows, int k, int K,
                                         bool aligned, float (&v)[n]) {
  const T* p = base + row * pitch + k;
  if (aligned && row < rows && k + n <= K) {
    if constexpr (sizeof(T) == 4) {
#pragma unroll
      for (int i = 0; i < n; i += 4) {
        const float4 q = __ldg(reinterpret_cast<const float4*>(p + i));
        v[i] = q.x, v[i + 1] = q.y, v[i + 2] = q.z, v[i + 3] = q.w;
      }
    } else if constexpr (kRunVec<T, n> == 8) {
#pragma unroll
      for (int i = 0; i < n; i += 8) {
        const uint4 q = __ldg(reinterpret_cast<const uint4*>(p + i));
        const uint32_t u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          v[i + 2 * j] = __uint_as_float(u[j] << 16);
          v[i + 2 * j + 1] = __uint_as_float(u[j] & 0xffff0000u);
        }
      }
    } else {
      static_assert(kRunVec<T, n> == 4, "bf16 runs are staged 4 or 8 at a time");
#pragma unroll
      for (int i = 0; i < n; i += 4) {
        const uint2 q = __ldg(reinterpret_cast<const uint2*>(p + i));
        v[i] = __uint_as_float(q.x << 16);
        v[i + 1] = __uint_as_float(q.x & 0xffff0000u);
        v[i + 2] = __uint_as_float(q.y << 16);
        v[i + 3] = __uint_as_float(q.y & 0xffff0000u);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < n; ++i) v[i] = row < rows && k + i < K ? to_float(p[i]) : 0.f;
  }
}

// Whether rows of `pitch` elements starting at `base` allow kRunVec<T, n>-wide loads.
template <class T, int n>
__device__ __forceinline__ bool runs_aligned(const void* base, int64_t pitch) {
  constexpr int vec = kRunVec<T, n>;
  return pitch % vec == 0 && reinterpret_cast<uintptr_t>(base) % (vec * sizeof(T)) == 0;
}

template <class W, int TM, int TN>
__device__ void linear_tiled(const ninfer_linear_args& a, int64_t begin, int64_t end) {
  using S = TileShape<TM, TN>;
  constexpr int BM = S::BM, BN = S::BN, XE = S::x_per_thread, WE = S::w_per_thread;
  __shared__ __align__(16) float xs[2][BK][BM + kPad];
  __shared__ __align__(16) float ws[2][BK][BN + kPad];
  const int K = a.in_features, N = a.out_features;
  const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
  // The staging assignment: thread tid loads XE consecutive k of one x row, WE of one W row.
  const int xm = tid / (BK / XE), xk = tid % (BK / XE) * XE;
  const int wn = tid / (BK / WE), wk = tid % (BK / WE) * WE;
  const W* w = static_cast<const W*>(a.w);
  const int64_t n_base = static_cast<int64_t>(blockIdx.x) * BN;
  const bool x_aligned = runs_aligned<float, XE>(a.x, a.x_row_stride);
  const bool w_aligned = runs_aligned<W, WE>(a.w, K);
  const int ktiles = (K + BK - 1) / BK;
  const int64_t tiles = (end - begin + BM - 1) / BM;
  for (int64_t tile = blockIdx.y; tile < tiles; tile += gridDim.y) {
    const int64_t t0 = begin + tile * BM;
    const int64_t nt = min(static_cast<int64_t>(BM), end - t0);
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
    float xv[XE], wv[WE];
    auto fetch = [&](int kt) {
      load_run<float, XE>(a.x + t0 * a.x_row_stride, a.x_row_stride, xm, nt, kt * BK + xk, K, x_aligned, xv);
      load_run<W, WE>(w + n_base * K, K, wn, N - n_base, kt * BK + wk, K, w_aligned, wv);
    };
    auto stage = [&](int buf) {
#pragma unroll
      for (int i = 0; i < XE; ++i) xs[buf][xk + i][xm] = xv[i];
#pragma unroll
      for (int i = 0; i < WE; ++i) ws[buf][wk + i][wn] = wv[i];
    };
    __syncthreads(); // the previous token tile is done with both buffers
    fetch(0);
    stage(0);
    __syncthreads();
    for (int kt = 0; kt < ktiles; ++kt) {
      const int cur = kt & 1;
      if (kt + 1 < ktiles) fetch(kt + 1);
#pragma unroll
      for (int kk = 0; kk < BK; ++kk) {
        float af[TM], bf[TN];
#pragma unroll
        for (int h = 0; h < TM / 4; ++h) {
          const float4 q = *reinterpret_cast<const float4*>(&xs[cur][kk][h * 64 + ty * 4]);
          af[4 * h] = q.x, af[4 * h + 1] = q.y, af[4 * h + 2] = q.z, af[4 * h + 3] = q.w;
        }
#pragma unroll
        for (int h = 0; h < TN / 4; ++h) {
          const float4 q = *reinterpret_cast<const float4*>(&ws[cur][kk][h * 64 + tx * 4]);
          bf[4 * h] = q.x, bf[4 * h + 1] = q.y, bf[4 * h + 2] = q.z, bf[4 * h + 3] = q.w;
        }
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(af[i], bf[j], acc[i][j]);
      }
      if (kt + 1 < ktiles) stage(cur ^ 1);
      __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int m = i / 4 * 64 + ty * 4 + i % 4;
      if (m >= nt) continue;
      float* y = a.y + (t0 + m) * a.y_row_stride;
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const int64_t n = n_base + j / 4 * 64 + tx * 4 + j % 4;
        if (n < N) y[n] = a.accumulate ? y[n] + acc[i][j] : acc[i][j];
      }
    }
  }
}

} // namespace
} // namespace ninfer::cuda_plugin

// MIN_CTAS: CTAs per SM the register allocation must allow. Unbounded, fma_tile128 takes 145
// registers (one 256-thread CTA per SM) and fma_tile64 95; the caps cost a few bytes of spills.
#define NINFER_TILED(NAME, TM, TN, MIN_CTAS)                                                                     \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kTiledThreads, MIN_CTAS)                    \
      ninfer_linear_##NAME##_f32(ninfer_linear_args a, int64_t b, int64_t e) {                                   \
    ninfer::cuda_plugin::grid_dependency_prologue(); \
    ninfer::cuda_plugin::linear_tiled<float, TM, TN>(a, b, e);                                                   \
  }                                                                                                              \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kTiledThreads, MIN_CTAS)                    \
      ninfer_linear_##NAME##_bf16(ninfer_linear_args a, int64_t b, int64_t e) {                                  \
    ninfer::cuda_plugin::grid_dependency_prologue(); \
    ninfer::cuda_plugin::linear_tiled<__nv_bfloat16, TM, TN>(a, b, e);                                           \
  }

NINFER_TILED(fma_tile64, 4, 4, 3)
NINFER_TILED(fma_tile128, 8, 8, 2)

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

template <int TM, int TN>
struct TiledDefBase : TokenDefDefaults {
  using Args = ninfer_linear_args;
  static constexpr const char* op = NINFER_OP_LINEAR;
  static constexpr int threads = kTiledThreads;
  static constexpr int tokens_per_cta = TileShape<TM, TN>::BM;
  static constexpr int32_t geometry = NINFER_GEOMETRY_TOKEN_TILED;
  static constexpr uint32_t dtype_mask = kF32OrBf16Mask;
  static int32_t dtype(const Args& a) { return a.w_dtype; }
  static int32_t supports(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0; }
  static const char* invalid(const Args& a, const ninfer_launch& l) { return linear_args_invalid(a, l, nullptr); }
  static dim3 grid(const Args& a, const ninfer_launch& l) {
    return linear_grid(a.out_features, TileShape<TM, TN>::BN, l.grid_x);
  }
};

struct FmaTile64Def : TiledDefBase<4, 4> {
  static constexpr const char* name = "fma_tile64";
  static KernelPair kernels() {
    return {"ninfer_linear_fma_tile64_f32", reinterpret_cast<const void*>(ninfer_linear_fma_tile64_f32),
            "ninfer_linear_fma_tile64_bf16", reinterpret_cast<const void*>(ninfer_linear_fma_tile64_bf16)};
  }
};

struct FmaTile128Def : TiledDefBase<8, 8> {
  static constexpr const char* name = "fma_tile128";
  static KernelPair kernels() {
    return {"ninfer_linear_fma_tile128_f32", reinterpret_cast<const void*>(ninfer_linear_fma_tile128_f32),
            "ninfer_linear_fma_tile128_bf16", reinterpret_cast<const void*>(ninfer_linear_fma_tile128_bf16)};
  }
};

} // namespace

int32_t register_linear_fma_tiles(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<FmaTile64Def, FmaTile128Def>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
