// linear for decode-sized token counts (contract: ninfer/abi/ops/linear.h):
// y[t, n] = sum_k x[t, k] * w[n, k], or y[t, n] += that when `accumulate` is nonzero.
//
// Two builds read this file. The CUDA plugins compile it at run time with NVRTC for the GPU at
// hand, one parameter set per variant (jit/gemv_family.cpp appends the entry points; the file is
// embedded into the plugins as text), and linear/linear_gemv_warp.cu includes it for the prebuilt
// linear/gemv_warp_t1 and gemv_warp_t2 (jit_gemv_t128_r2_v8_m1 / _m2), with entry points of their own
// around gemv<> below. So it stays plain CUDA C++17 with no #include and no
// architecture-specific instruction (it compiles for sm_80 and every later architecture), free of
// anything nvcc and NVRTC would read differently. A run-time variant's name
// jit_gemv_t<THREADS>_r<ROWS>_v<VEC>_m<TOKENS> spells its parameters:
//   THREADS  threads per CTA (a multiple of 32)
//   ROWS     rows of W (outputs) per warp; a CTA owns THREADS / 32 * ROWS consecutive rows, so
//            grid.x = ceil(out_features / that), a number that follows from the shape alone
//   VEC      weight elements each lane loads at once (bf16: 8 = one 16-byte load, 4 = 8 bytes;
//            f32: 4 = 16 bytes, 8 = two 16-byte loads)
//   TOKENS   tokens per CTA (one token tile); grid.y strides over the planner's token tiles
// Each lane accumulates ROWS x TOKENS float32 sums over its strided slice of the reduction; the
// warp adds them up at the end (shuffles, no shared memory, no barrier) and lane 0 stores each
// sum (adding y's previous value when accumulating: one lane per element, so in place is safe). W is streamed once per
// token tile; x is read through the read-only cache (every warp of a CTA reads the same rows).
// A row of W or x that is not aligned for vector loads (in_features % VEC != 0, odd strides)
// takes the scalar path: correct for any shape, fast for the shapes models have.
namespace ninfer_jit {

typedef unsigned int u32;

struct Bf16 {
  typedef unsigned short type;
  static constexpr int bytes = 2;
};
struct F32 {
  typedef float type;
  static constexpr int bytes = 4;
};

// BYTES bytes at p (aligned to min(BYTES, 16)) as 32-bit words, through the read-only cache.
template <int BYTES>
__device__ __forceinline__ void load_words(const void* p, u32 (&w)[BYTES / 4]) {
  if constexpr (BYTES % 16 == 0) {
#pragma unroll
    for (int i = 0; i < BYTES / 16; ++i) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(p) + i);
      w[4 * i] = v.x;
      w[4 * i + 1] = v.y;
      w[4 * i + 2] = v.z;
      w[4 * i + 3] = v.w;
    }
  } else if constexpr (BYTES == 8) {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
    w[0] = v.x;
    w[1] = v.y;
  } else {
    static_assert(BYTES == 4, "loads are 4, 8 or a multiple of 16 bytes");
    w[0] = __ldg(reinterpret_cast<const u32*>(p));
  }
}

// VEC weights from their words: bf16 is the high half of a float32.
template <class W, int VEC>
__device__ __forceinline__ void widen(const u32 (&w)[VEC * W::bytes / 4], float (&f)[VEC]) {
  if constexpr (W::bytes == 2) {
#pragma unroll
    for (int i = 0; i < VEC / 2; ++i) {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  } else {
#pragma unroll
    for (int i = 0; i < VEC; ++i) f[i] = __uint_as_float(w[i]);
  }
}

__device__ __forceinline__ float to_float(unsigned short b) { return __uint_as_float(static_cast<u32>(b) << 16); }
__device__ __forceinline__ float to_float(float f) { return f; }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Asks the L2 for the first `bytes` of each weight row this warp will stream (the warp's rows
// as gemv() below assigns them). Weights are never written during a step, so a prebuilt kernel
// may do this BEFORE waiting for the previous kernel (programmatic dependent launch): the
// first lines of W then arrive while the previous, latency-bound kernel (a norm, attention)
// finishes, instead of after it. A hint only: the loads that follow read current memory.
template <class W, int THREADS, int ROWS>
__device__ __forceinline__ void prefetch_rows(const void* w, int K, int N, int bytes) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long long n0 = (static_cast<long long>(blockIdx.x) * (THREADS / 32) + warp) * ROWS;
  const long long row_bytes = static_cast<long long>(K) * W::bytes;
  const long long span = row_bytes < bytes ? row_bytes : bytes;
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    if (n0 + r >= N) break;
    const char* row = static_cast<const char*>(w) + (n0 + r) * row_bytes;
    for (long long off = lane * 128LL; off < span; off += 32 * 128LL)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(row + off));
  }
}

template <class W, int THREADS, int ROWS, int VEC, int TOKENS>
__device__ __forceinline__ void gemv(const float* __restrict__ x, long long x_stride, const void* w_raw,
                                     float* __restrict__ y, long long y_stride, int K, int N, long long begin,
                                     long long end, int accumulate) {
  static_assert(THREADS % 32 == 0, "whole warps");
  static_assert(VEC * W::bytes % 4 == 0, "a weight load is whole 32-bit words");
  constexpr int kWarps = THREADS / 32;
  constexpr int kWords = VEC * W::bytes / 4;
  constexpr int kXBytes = VEC * 4;
  // Loads in flight per lane before the first is used: ROWS x kSteps vector loads of W.
  constexpr int kSteps = ROWS >= 4 ? 1 : 4 / ROWS;
  typedef typename W::type T;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long long n0 = (static_cast<long long>(blockIdx.x) * kWarps + warp) * ROWS;
  if (n0 >= N) return; // nothing below synchronises the CTA, so a warp without rows may leave
  const T* w = static_cast<const T*>(w_raw);
  const T* rows[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) rows[r] = w + min(n0 + r, static_cast<long long>(N) - 1) * K; // clamped, never stored
  const int x_align = kXBytes < 16 ? kXBytes : 16;
  const int w_align = VEC * W::bytes < 16 ? VEC * W::bytes : 16;
  const bool vec = K % VEC == 0 && reinterpret_cast<unsigned long long>(w) % w_align == 0 &&
                   reinterpret_cast<unsigned long long>(x) % x_align == 0 && (x_stride * 4) % x_align == 0;
  const long long tiles = (end - begin + TOKENS - 1) / TOKENS;
  for (long long tile = blockIdx.y; tile < tiles; tile += gridDim.y) {
    const long long t0 = begin + tile * TOKENS;
    const int nt = static_cast<int>(min(static_cast<long long>(TOKENS), end - t0));
    const float* xr[TOKENS];
#pragma unroll
    for (int t = 0; t < TOKENS; ++t) xr[t] = x + (t0 + min(t, nt - 1)) * x_stride; // past the tile: re-read, never stored
    float acc[ROWS][TOKENS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
      for (int t = 0; t < TOKENS; ++t) acc[r][t] = 0.f;

    if (vec) {
      const int steps = K / VEC;
      for (int s0 = lane; s0 < steps; s0 += 32 * kSteps) {
        u32 wr[kSteps][ROWS][kWords];
#pragma unroll
        for (int u = 0; u < kSteps; ++u) {
          const int s = s0 + 32 * u;
#pragma unroll
          for (int r = 0; r < ROWS; ++r) {
            if (s < steps) {
              load_words<VEC * W::bytes>(rows[r] + static_cast<long long>(s) * VEC, wr[u][r]);
            } else {
#pragma unroll
              for (int i = 0; i < kWords; ++i) wr[u][r][i] = 0u;
            }
          }
        }
#pragma unroll
        for (int u = 0; u < kSteps; ++u) {
          const int s = s0 + 32 * u;
          if (s >= steps) break;
          float wf[ROWS][VEC];
#pragma unroll
          for (int r = 0; r < ROWS; ++r) widen<W, VEC>(wr[u][r], wf[r]);
#pragma unroll
          for (int t = 0; t < TOKENS; ++t) {
            u32 xw[VEC];
            load_words<kXBytes>(xr[t] + static_cast<long long>(s) * VEC, xw);
#pragma unroll
            for (int r = 0; r < ROWS; ++r)
#pragma unroll
              for (int i = 0; i < VEC; ++i) acc[r][t] = fmaf(__uint_as_float(xw[i]), wf[r][i], acc[r][t]);
          }
        }
      }
    } else {
      for (int k = lane; k < K; k += 32) {
        float wf[ROWS];
#pragma unroll
        for (int r = 0; r < ROWS; ++r) wf[r] = to_float(rows[r][k]);
#pragma unroll
        for (int t = 0; t < TOKENS; ++t) {
          const float xv = __ldg(xr[t] + k);
#pragma unroll
          for (int r = 0; r < ROWS; ++r) acc[r][t] = fmaf(xv, wf[r], acc[r][t]);
        }
      }
    }

#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
      for (int t = 0; t < TOKENS; ++t) {
        const float v = warp_sum(acc[r][t]);
        if (lane == 0 && n0 + r < N && t < nt) {
          float* yp = y + (t0 + t) * y_stride + n0 + r;
          *yp = accumulate ? *yp + v : v;
        }
      }
  }
}

} // namespace ninfer_jit
