// The lean quantized GEMV, 1-16 tokens a launch on the tensor cores, for every code format whose
// decode fits its design: int4 (linear/linear_gemv_int4_lean.cu: gemv_int4_lean) and fp8 e4m3
// (linear/linear_gemv_fp8_lean.cu: gemv_fp8_lean). Decode must stream the codes at the memory's
// rate, and at the copy rate an SM takes in 13-18 code bytes per cycle against the 4 warp
// instructions it can issue, so everything that is not the decode of a code is taken out of the K
// loop or specialized away (docs/quantization.md):
//   - x is read, split into 16-bit hi + lo halves and stored once per CTA, in shared memory,
//     already in the MMA's B-fragment order: a lane's whole B operand of a step is 4
//     ld.shared.v4 per column tile, and the MMA's 8 columns are (token, hi) and (token, lo) for
//     up to 4 tokens, so one MMA per 16 k takes both halves of x of every token (x keeps float32
//     accuracy; columns past 2T read a copy of the last one and feed outputs never stored);
//   - a warp owns one 16-row tile and the CTA's whole stretch of K; each step a lane decodes its
//     rows g and g + 8 over 32 of the step's 128 k (the format's decode: the .cu files) into the
//     MMA's A fragments;
//   - a step is one quantization group (the g128 kernels) or within one (group a multiple of
//     128, or one group per row: a step counter, no division), so its MMAs sum code values times
//     x in float32 and one FMA per row applies the group's scale: w = value * scale exactly as
//     the contract defines it, never rounded;
//   - the first steps' codes are loaded before the launch wait (weights: no kernel of the step
//     writes them), so a CTA placed while the previous kernel drains starts its stream at once
//     (+2.6% int4 decode at batch 1, 27B, H100);
//   - codes in NINFER_QUANT_LAYOUT_TILES16 (quant_weight.h: the loader puts them so wherever this
//     is the decode route) make a warp's step one contiguous block (1 KB of int4: 16 rows x 64
//     bytes) and its steps consecutive blocks, where row-major codes are 16 runs of 64 bytes a
//     row apart: int4 decode at batch 1 107.4 -> 129.7 tok/s on the 27B shape, H100 (the
//     kernels are the same but for the addresses; docs/quantization.md, "Code tiles");
//   - the codes of the next steps are in flight in registers (16-byte ld.global.nc, no L1
//     allocation) while a step is computed, in a ring that a fully unrolled round walks (a load
//     goes to the buffer the previous step freed: no copies); the scales and zeros are loaded by
//     the step that uses them (L1 hits after a row's first); addresses advance by pointer
//     increments once per round, the steps use immediate offsets;
//   - one kernel per scale dtype, zeros or not, and group form, so a step has no branch on any of
//     them; the token count costs nothing inside the loop (each lane reads one B column whatever
//     the count) and is a launch argument; 5-8 tokens take the _t8 kernels, whose step feeds each
//     decoded fragment to two MMA column tiles (4 tokens each) at 2 CTAs per SM, so 8 tokens read
//     the codes once; 9-16 the _t16 kernels (four tiles: a verification step of 4 sequences x 4
//     tokens reads the codes once, not twice), with one step of codes in flight;
//   - the K chunks: a CTA is 8 warps = 128 rows; where N alone gives fewer than kTargetCtas CTAs
//     (5,120-row projections: 40), K is cut into chunks (grid.y) whose partial sums meet in the
//     launch workspace through the backend's launch tickets (the last CTA of a row block adds
//     them in chunk order: deterministic), as the split-key decode does (attention/decode_merge.cuh);
//     K is also cut where a chunk's x would not fit 64 KB of shared memory.
// A call of 17-64 tokens runs as launches of 16 (launch_tokens: the codes streamed once per 16).
// Shapes: 1-64 tokens, K a multiple of 128, group a multiple of 128 or >= K, no g_idx (the
// planning shape's dims[2]); the rest goes to the other quantized variants. The kernels are
// defined in the .cu files, not here: cuda-generic's NVRTC programs are the .cu files whose own
// text defines a kernel (plugins/cuda-generic/CMakeLists.txt).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/grid_dependency.cuh"
#include "linear/linear_gemv_mma_bf16.cuh"
#include "linear/quant_common.cuh"
#include "linear/quant_mma_fragments.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include <algorithm>

#include "linear/quant_variant.hpp"
#endif

namespace ninfer::cuda_plugin::gemv_lean {

using namespace quant;
using gemv_bf16::bf16_hi;
using gemv_bf16::bf16_lo;
using gemv_bf16::load_stream;
using gemv_bf16::pack_bf16;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRows = 16 * kWarps;      // rows per CTA: one 16-row MMA tile per warp
constexpr int kTileTokens = 4;          // an MMA's 8 columns: (token, hi) and (token, lo)
constexpr int kMaxTokens = 16;          // four MMA column tiles (the _t16 kernels: 9-16 tokens)
constexpr int kStepK = 128;             // k per warp step: 4 lane quarters x 32 codes
constexpr int kStepXBytes = 4 * 4 * 16; // one B column of a step: 4 x 16 bytes per lane quarter
constexpr int kColumnPad = 64;          // columns 2t and 2t + 1 start 64 bytes apart mod 128: no bank conflict
constexpr int kTargetCtas = 384;        // CTAs a launch aims for (a property of the shape: ~3 per SM)
constexpr int kTargetCtas8 = 256;       // the same for the _t8 and _t16 kernels (~2 per SM)
constexpr int kMinSteps = 8;            // steps per chunk, at least, when K is cut for more CTAs

// The code formats: bytes of a row's 128-k step, its 16-byte loads per row and lane, steps of
// codes in flight at 1-8 tokens (the code registers of kAhead + 1 steps fit 80 per thread with 3
// CTAs per SM: 3 x 8 warps x 2 KB in flight either way), zero points, and x's halves (bf16, or
// f16 after a power-of-two scale per token: fp8 codes become f16 in one instruction per pair).
struct Int4 {
  static constexpr int kStepBytes = kStepK / 2, kVecs = 1, kAhead = 2;
  static constexpr bool kZeroPoints = true, kF16X = false;
};
struct Fp8 {
  static constexpr int kStepBytes = kStepK, kVecs = 2, kAhead = 1;
  static constexpr bool kZeroPoints = false, kF16X = true;
};
// Steps in flight for P column tiles: the _t16 kernels' accumulators leave room for one.
template <class F>
__host__ __device__ constexpr int ahead(int P) {
  return P == 4 ? 1 : F::kAhead;
}

// Steps of one CTA's chunk of K, at most: its x (4 bytes per k and token) stays within 64 KB of
// shared memory (66 KB with the padding at 16 tokens), so 3 CTAs fit on an SM at 4 tokens (2 at
// 8 and 16).
__host__ __device__ constexpr int max_chunk_steps(int tokens) { return 128 / tokens; }

// Chunks K is cut into (grid.y): as few as shared memory allows, then more while the launch has
// fewer than kTargetCtas CTAs and every chunk keeps kMinSteps steps.
__host__ __device__ constexpr int k_chunks(long long K, long long N, int tokens) {
  const int steps = static_cast<int>(K / kStepK);
  const long long blocks = (N + kRows - 1) / kRows;
  int ks = (steps + max_chunk_steps(tokens) - 1) / max_chunk_steps(tokens);
  const int target = tokens > kTileTokens ? kTargetCtas8 : kTargetCtas;
  while (ks < steps && blocks * (ks + 1) <= target && steps / (ks + 1) >= kMinSteps) ++ks;
  return ks;
}

// Bytes of one B column in shared memory (the longest chunk's steps, plus the bank padding).
__host__ __device__ constexpr int column_bytes(long long K, int ks) {
  return static_cast<int>((K / kStepK + ks - 1) / ks) * kStepXBytes + kColumnPad;
}

__host__ __device__ constexpr long long smem_bytes(long long K, long long N, int tokens) {
  return 2LL * tokens * column_bytes(K, k_chunks(K, N, tokens));
}

// Where a cut K's chunks meet: partials [ks][tokens][N] in the launch workspace, one ticket per
// row block.
struct Split {
  float* partials;
  unsigned* tickets;
  int ks;
};

// A scale as stored (SD: its ninfer_dtype) and its float32 value, exact.
template <int SD>
struct Scale {
  using raw = unsigned short;
  __device__ static float value(raw r) {
    if constexpr (SD == NINFER_DTYPE_BF16) return __uint_as_float(static_cast<u32>(r) << 16);
    else return f16_to_float(r);
  }
};
template <>
struct Scale<NINFER_DTYPE_F32> {
  using raw = float;
  __device__ static float value(raw r) { return r; }
};

// One step's codes of a lane: F::kVecs x 16 bytes of rows g (c0) and g + 8 (c8), in flight in
// registers before their turn.
template <class F>
struct Codes {
  uint4 c0[F::kVecs], c8[F::kVecs];
};
// One step's group terms of a lane's rows g and g + 8: scales as stored, zeros (kZeros). A row's
// scales and zeros share one or two 128-byte lines, so after the first they come from L1: they
// are loaded by the step that uses them, which keeps the registers for the codes in flight.
template <int SD, bool kZeros>
struct Terms {
  typename Scale<SD>::raw s0, s8;
  u32 z0, z8;
};

// The rows' positions of one lane: pointers to the codes of the next step to load, and 32-bit
// indices into scales and zeros ([N, G] both: one index serves both, the bases are kernel
// parameters) of the group of the next terms to load. Few registers: the codes in flight need them.
struct Rows {
  const unsigned char *c0, *c8;
  int t0, t8;
};

// Bytes from one step of a row's codes to the next: a piece in row-major codes, a band's 16
// pieces in tiles (quant_weight.h).
template <class F, bool kTiled>
constexpr int kStepStride = kTiled ? 16 * F::kStepBytes : F::kStepBytes;

// The codes of the step u past r's code pointers (u a constant once unrolled: immediate offsets);
// a lane's kVecs loads of a row are 16 * kVecs consecutive bytes.
template <class F, bool kTiled>
__device__ __forceinline__ Codes<F> load_codes(const Rows& r, int u) {
  Codes<F> c;
#pragma unroll
  for (int i = 0; i < F::kVecs; ++i) {
    c.c0[i] = load_stream(reinterpret_cast<const uint4*>(r.c0 + u * kStepStride<F, kTiled>) + i);
    c.c8[i] = load_stream(reinterpret_cast<const uint4*>(r.c8 + u * kStepStride<F, kTiled>) + i);
  }
  return c;
}
// The group terms u groups past r's term indices.
template <int SD, bool kZeros>
__device__ __forceinline__ Terms<SD, kZeros> load_terms(const Args& a, const Rows& r, int u) {
  using Raw = typename Scale<SD>::raw;
  Terms<SD, kZeros> t;
  t.s0 = __ldg(static_cast<const Raw*>(a.scales) + r.t0 + u), t.s8 = __ldg(static_cast<const Raw*>(a.scales) + r.t8 + u);
  if constexpr (kZeros) t.z0 = __ldg(a.zeros + r.t0 + u), t.z8 = __ldg(a.zeros + r.t8 + u);
  else t.z0 = t.z8 = 0u;
  return t;
}

// The step's sums (acc[p]: rows g (0, 1) and g + 8 (2, 3) of columns 2q (x hi) and 2q + 1 (x lo)
// = token 4p + q) times their group's scales into t0[p] (row g) and t8[p] (row g + 8).
template <int SD, bool kZeros, int P>
__device__ __forceinline__ void add_scaled(const float (&acc)[P][4], const Terms<SD, kZeros>& z, float (&t0)[P],
                                           float (&t8)[P]) {
  const float s0 = Scale<SD>::value(z.s0), s8 = Scale<SD>::value(z.s8);
#pragma unroll
  for (int p = 0; p < P; ++p) {
    t0[p] = fmaf(s0, acc[p][0] + acc[p][1], t0[p]);
    t8[p] = fmaf(s8, acc[p][2] + acc[p][3], t8[p]);
  }
}

// One int4 step of one lane: per 32-bit word (8 codes of a row), 3 shifts, 4 lop3 (nibbles i
// and i + 4 under bf16 128.0's exponent: 128 + u) and 4 bf16x2 subtractions of 128 + zero (exact:
// u - zero is a small integer) feed two MMAs per column tile: 11 instructions per 8 codes. The
// word's nibble pairs sit at bit offsets 0, 4, 8 and 12 of each half and bf16 has 7 mantissa
// bits, so no layout of the nibbles needs fewer shifts. x's B fragments at xa[p] (tile p: tokens
// 4p .. 4p + 3) are staged in the nibbles' order (stage_x).
template <int SD, bool kZeros, int P>
__device__ __forceinline__ void compute_step(const Codes<Int4>& c, const Terms<SD, kZeros>& z, const u32 (&xa)[P],
                                             float (&t0)[P], float (&t8)[P]) {
  // 128 + zero in both bf16 halves: symmetric weights' zero is 8.
  const u32 b0 = kZeros ? z.z0 * 0x10001u + 0x43004300u : 0x43084308u;
  const u32 b8 = kZeros ? z.z8 * 0x10001u + 0x43004300u : 0x43084308u;
  float acc[P][4];
#pragma unroll
  for (int j = 0; j < 4; ++j) { // word j: the quarter's k 8j .. 8j + 7; B = x (0,4) (1,5) (2,6) (3,7)
    const u32 w0 = (&c.c0[0].x)[j], w8 = (&c.c8[0].x)[j];
    const u32 lo[4] = {int4_pair(w0, 0, b0), int4_pair(w8, 0, b8), int4_pair(w0, 1, b0), int4_pair(w8, 1, b8)};
    const u32 hi[4] = {int4_pair(w0, 2, b0), int4_pair(w8, 2, b8), int4_pair(w0, 3, b0), int4_pair(w8, 3, b8)};
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const uint4 xv = lds16(xa[p] + j * 64);
      if (j == 0) mma_first(acc[p], lo, xv.x, xv.y);
      else mma(acc[p], lo, xv.x, xv.y);
      mma(acc[p], hi, xv.z, xv.w);
    }
  }
  add_scaled<SD, kZeros, P>(acc, z, t0, t8);
}

// One fp8 step of one lane: a word's 4 e4m3 codes of a row (k 4i .. 4i + 3 of the quarter) are
// two f16 pairs, one conversion instruction each (exact: every e4m3 value is an f16), the A
// fragment's (k, k + 1) and (k + 2, k + 3) halves of one f16 MMA per column tile: x's B fragments
// are in k order (stage_x).
template <int SD, bool kZeros, int P>
__device__ __forceinline__ void compute_step(const Codes<Fp8>& c, const Terms<SD, kZeros>& z, const u32 (&xa)[P],
                                             float (&t0)[P], float (&t8)[P]) {
  float acc[P][4];
#pragma unroll
  for (int j = 0; j < 4; ++j) { // x's 16 bytes j: words 2j and 2j + 1 of the quarter
    uint4 xv[P];
#pragma unroll
    for (int p = 0; p < P; ++p) xv[p] = lds16(xa[p] + j * 64);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = 2 * j + h;
      u32 a[4];
      e4m3x4_to_f16x2((&c.c0[i / 4].x)[i % 4], a[0], a[2]);
      e4m3x4_to_f16x2((&c.c8[i / 4].x)[i % 4], a[1], a[3]);
#pragma unroll
      for (int p = 0; p < P; ++p) {
        const u32 b0 = h ? xv[p].z : xv[p].x, b1 = h ? xv[p].w : xv[p].y;
        if (i == 0) mma_f16_first(acc[p], a, b0, b1);
        else mma_f16(acc[p], a, b0, b1);
      }
    }
  }
  add_scaled<SD, kZeros, P>(acc, z, t0, t8);
}

// x rows [begin, begin + tokens) over steps [st0, st0 + n) into shared memory as B fragments:
// column 2t (hi) and 2t + 1 (lo) of token t, each `col` bytes; within a column, step s, 16-byte
// unit j of lane quarter q at s * kStepXBytes + 64 j + 16 q holds k = 128 s + 32 q + 8 j + [0, 8):
// int4 as the bf16 pairs (x0, x4) (x1, x5) (x2, x6) (x3, x7), the order in which a word's
// nibbles decode; fp8 as the f16 pairs (x0, x1) .. (x6, x7) of x times factor[t].
template <class F>
__device__ __forceinline__ void stage_x(const Args& a, long long begin, int tokens, int st0, int n, int col,
                                        unsigned char* xs, const float* factor) {
  // Half a unit's x per thread and round, 8 bytes of each column (few registers: the first codes
  // are in flight meanwhile): int4 (x[2h], x[2h + 4]) and (x[2h + 1], x[2h + 5]); fp8 x[4h .. 4h + 3].
  const bool vec = a.x_stride % 2 == 0 && reinterpret_cast<unsigned long long>(a.x) % 8 == 0;
  const int units = n * 32; // half units per token
  for (int i = threadIdx.x; i < tokens * units; i += kThreads) {
    const int t = i / units, u = i - t * units;
    const int h = u & 1, q = (u >> 1) & 3, j = (u >> 3) & 3, s = u >> 5;
    const float* row = a.x + (begin + t) * a.x_stride + static_cast<long long>(st0 + s) * kStepK + 32 * q + 8 * j;
    const float* src = row + (F::kF16X ? 4 * h : 2 * h);
    const int off = s * kStepXBytes + 64 * j + 16 * q + 8 * h;
    float2 v0, v1; // int4: x[2h], x[2h + 1] and x[2h + 4], x[2h + 5]; fp8: x[4h], x[4h + 1] and x[4h + 2], x[4h + 3]
    const int second = F::kF16X ? 2 : 4;
    if (vec) {
      v0 = __ldg(reinterpret_cast<const float2*>(src)), v1 = __ldg(reinterpret_cast<const float2*>(src + second));
    } else {
      v0 = make_float2(__ldg(src), __ldg(src + 1)), v1 = make_float2(__ldg(src + second), __ldg(src + second + 1));
    }
    uint2 hi, lo;
    if constexpr (F::kF16X) {
      const float f = factor[t];
      const float x[4] = {v0.x * f, v0.y * f, v1.x * f, v1.y * f};
      __half2 h2[2], l2[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        h2[e] = __floats2half2_rn(x[2 * e], x[2 * e + 1]);
        l2[e] = __floats2half2_rn(x[2 * e] - __low2float(h2[e]), x[2 * e + 1] - __high2float(h2[e]));
      }
      hi = make_uint2(*reinterpret_cast<const u32*>(&h2[0]), *reinterpret_cast<const u32*>(&h2[1]));
      lo = make_uint2(*reinterpret_cast<const u32*>(&l2[0]), *reinterpret_cast<const u32*>(&l2[1]));
    } else {
      const u32 h0 = pack_bf16(v0.x, v1.x), h1 = pack_bf16(v0.y, v1.y);
      hi = make_uint2(h0, h1);
      lo = make_uint2(pack_bf16(v0.x - bf16_lo(h0), v1.x - bf16_hi(h0)), pack_bf16(v0.y - bf16_lo(h1), v1.y - bf16_hi(h1)));
    }
    *reinterpret_cast<uint2*>(xs + (2 * t) * col + off) = hi;
    *reinterpret_cast<uint2*>(xs + (2 * t + 1) * col + off) = lo;
  }
}

// f16 halves of x (F::kF16X): per token, the power of two that brings the largest |x| of the
// CTA's chunk into [2^13, 2^14) (f16's largest finite value is 65504: a product with an e4m3
// code, at most 448, stays far inside float32, and the lo half keeps 11 more bits), into
// factor[t]; the token's sums are multiplied back by its inverse (unscale), both exact.
__device__ __forceinline__ void x_factors(const Args& a, long long begin, int tokens, int st0, int n, float* factor,
                                          unsigned* amax_bits) {
  if (threadIdx.x < tokens) amax_bits[threadIdx.x] = 0u;
  __syncthreads();
  const int len = n * kStepK;
  for (int t = 0; t < tokens; ++t) {
    const float* row = a.x + (begin + t) * a.x_stride + static_cast<long long>(st0) * kStepK;
    float m = 0.f;
    for (int k = threadIdx.x; k < len; k += kThreads) m = fmaxf(m, fabsf(__ldg(row + k)));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) atomicMax(amax_bits + t, __float_as_uint(m)); // non-negative floats order as their bits
  }
  __syncthreads();
  if (threadIdx.x < tokens) {
    const float m = __uint_as_float(amax_bits[threadIdx.x]);
    // 2^(13 - e) for m in [2^e, 2^(e + 1)); zero rows keep 1. Clamped so both the factor and its
    // inverse are normal floats.
    int e = 0;
    if (m > 0.f && isfinite(m)) e = ilogbf(m);
    e = max(-100, min(100, e));
    factor[threadIdx.x] = ldexpf(1.f, 13 - e);
  }
  __syncthreads();
}

// Token t's output y[t, row] from its sum.
__device__ __forceinline__ void store_y(const Args& a, long long begin, int t, long long row, float v) {
  float* y = a.y + (begin + t) * a.y_stride + row;
  *y = a.accumulate ? *y + v : v;
}

// y (or the chunk's partials) of the CTA's rows: lane (g, q) holds tokens q + 4p of its warp's
// rows g (t0[p]) and g + 8 (t8[p]). With a cut K, the CTA that takes its row block's ticket last
// adds the chunks' partials in chunk order.
template <int P>
__device__ __forceinline__ void finish(const Args& a, long long begin, int tokens, const Split& sp,
                                       const float (&t0)[P], const float (&t8)[P]) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const long long block_row0 = static_cast<long long>(blockIdx.x) * kRows;
  const long long r0 = block_row0 + 16 * warp + g, r8 = r0 + 8;
  if (sp.ks == 1) {
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int t = q + kTileTokens * p;
      if (t >= tokens) break;
      if (r0 < a.N) store_y(a, begin, t, r0, t0[p]);
      if (r8 < a.N) store_y(a, begin, t, r8, t8[p]);
    }
    return;
  }
  const long long chunk_stride = static_cast<long long>(tokens) * a.N;
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int t = q + kTileTokens * p;
    if (t >= tokens) break;
    float* part = sp.partials + blockIdx.y * chunk_stride + static_cast<long long>(t) * a.N;
    if (r0 < a.N) part[r0] = t0[p];
    if (r8 < a.N) part[r8] = t8[p];
  }
  __shared__ bool last;
  __threadfence(); // this CTA's partials before its ticket
  __syncthreads();
  if (threadIdx.x == 0) last = atomicInc(&sp.tickets[blockIdx.x], static_cast<unsigned>(sp.ks - 1)) == sp.ks - 1;
  __syncthreads();
  if (!last) return;
  __threadfence(); // the merge's reads after the other chunks' tickets
  for (int e = threadIdx.x; e < tokens * kRows; e += kThreads) {
    const int t = e / kRows;
    const long long r = block_row0 + (e - t * kRows);
    if (r >= a.N) continue;
    const float* part = sp.partials + static_cast<long long>(t) * a.N + r;
    float v = 0.f;
    for (int c = 0; c < sp.ks; ++c) v += __ldcg(part + c * chunk_stride); // chunk order: deterministic
    store_y(a, begin, t, r, v);
  }
}

// F: the code format; P: MMA column tiles (1: 1-4 tokens, 2: 5-8, 4: 9-16); kTiled: the codes in
// NINFER_QUANT_LAYOUT_TILES16.
template <class F, int SD, bool kZeros, bool kG128, int P, bool kTiled>
__device__ void gemv(const Args& a, long long begin, long long end, const Split& sp) {
  extern __shared__ __align__(16) unsigned char xs[];
  __shared__ float factor[F::kF16X ? kMaxTokens : 1];
  __shared__ unsigned amax_bits[F::kF16X ? kMaxTokens : 1];
  const int tokens = static_cast<int>(end - begin);
  const int steps = a.K / kStepK;
  const int st0 = static_cast<int>(static_cast<long long>(blockIdx.y) * steps / sp.ks);
  const int n = static_cast<int>(static_cast<long long>(blockIdx.y + 1) * steps / sp.ks) - st0;
  const int col = column_bytes(a.K, sp.ks);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const long long row0 = static_cast<long long>(blockIdx.x) * kRows + 16 * warp;
  const long long last_row = a.N - 1; // rows past N read row N - 1: in bounds, never stored
  const long long rg = min(row0 + g, last_row), r8 = min(row0 + g + 8, last_row);
  // The group of the chunk's first step and how far into it (the general form's counter).
  const int per_group = a.group_size >= a.K ? steps + 1 : a.group_size / kStepK; // steps + 1: never reached
  const int group0 = kG128 ? st0 : st0 / per_group;
  int in_group = kG128 ? 0 : st0 - group0 * per_group;
  Rows r;
  constexpr int kLaneBytes = 16 * F::kVecs; // a lane quarter's bytes of a row's step
  if constexpr (kTiled) {
    // The warp's band (row0 is a multiple of 16); a warp past N reads the last band, whose rows
    // are all allocated (quant_weight.h) and never stored.
    const long long band0 = min(row0, last_row & ~15LL);
    r.c0 = a.w + band0 * a.row_bytes + static_cast<long long>(st0) * kStepStride<F, true> + g * F::kStepBytes +
           kLaneBytes * q;
    r.c8 = r.c0 + 8 * F::kStepBytes;
  } else {
    r.c0 = a.w + rg * a.row_bytes + static_cast<long long>(st0) * F::kStepBytes + kLaneBytes * q;
    r.c8 = a.w + r8 * a.row_bytes + static_cast<long long>(st0) * F::kStepBytes + kLaneBytes * q;
  }
  r.t0 = static_cast<int>(rg * a.groups) + group0; // N * G < 2^31 (supports)
  r.t8 = static_cast<int>(r8 * a.groups) + group0;
  // This lane's B column (g; past the launch's 2 tokens columns, a copy of the last one).
  // (Tile p reads column 8p + g.)
  u32 xa[P];
#pragma unroll
  for (int p = 0; p < P; ++p)
    xa[p] = static_cast<u32>(__cvta_generic_to_shared(xs)) + min(8 * p + g, 2 * tokens - 1) * col + 16 * q;

  // kG128: the term indices are at the group of the round's first step, v past it for step v
  // (immediate offsets). Otherwise they are at the next step's group and move a group at a
  // time: a step counter, no division.
  auto next_terms = [&](int by) {
    if constexpr (kG128) {
      r.t0 += by, r.t8 += by;
    } else {
      const bool next_group = ++in_group == per_group;
      in_group = next_group ? 0 : in_group;
      const int d = next_group ? 1 : 0;
      r.t0 += d, r.t8 += d;
    }
  };

  constexpr int kAheadP = ahead<F>(P);
  // kRing code buffers: the step computed and kAheadP steps in flight. The load of a step goes
  // to the buffer the previous step freed, so no buffer is copied.
  constexpr int kRing = kAheadP + 1;
  Codes<F> ring[kRing];
#pragma unroll
  for (int u = 0; u < kAheadP; ++u)
    if (u < n) ring[u] = load_codes<F, kTiled>(r, u);
  // The codes are weights, which no kernel of the step writes: they are loaded before the launch
  // wait, while the previous kernel finishes (common/grid_dependency.cuh); x is its output.
  grid_dependency_prologue();
  // x while the first codes are in flight.
  if constexpr (F::kF16X) x_factors(a, begin, tokens, st0, n, factor, amax_bits);
  stage_x<F>(a, begin, tokens, st0, n, col, xs, factor);
  __syncthreads();

  // One step: the load of step v + kAheadP (where `more`), then step v's terms (L1 hits after a
  // row's first: the zeros are needed at once, the scales only after the MMAs) and MMAs.
  float t0[P], t8[P];
#pragma unroll
  for (int p = 0; p < P; ++p) t0[p] = t8[p] = 0.f;
  auto step = [&](int v, bool more) {
    if (more) ring[(v + kAheadP) % kRing] = load_codes<F, kTiled>(r, v + kAheadP);
    const Terms<SD, kZeros> terms = load_terms<SD, kZeros>(a, r, kG128 ? v : 0);
    if constexpr (!kG128) next_terms(1);
    u32 xv[P];
#pragma unroll
    for (int p = 0; p < P; ++p) xv[p] = xa[p] + v * kStepXBytes;
    compute_step<SD, kZeros, P>(ring[v % kRing], terms, xv, t0, t8);
  };
  int s = 0;
  // While every load of a round of kRing steps is a step of the chunk, a step is straight-line code.
  for (; s + kRing + kAheadP <= n; s += kRing) {
#pragma unroll
    for (int u = 0; u < kRing; ++u) step(u, true);
    r.c0 += kRing * kStepStride<F, kTiled>, r.c8 += kRing * kStepStride<F, kTiled>;
    if constexpr (kG128) next_terms(kRing);
#pragma unroll
    for (int p = 0; p < P; ++p) xa[p] += kRing * kStepXBytes;
  }
  // The last steps (fewer than kRing + kAheadP), each load only where its step is in the chunk.
#pragma unroll
  for (int v = 0; v < kRing + kAheadP - 1; ++v)
    if (s + v < n) step(v, s + v + kAheadP < n);
  if constexpr (F::kF16X) { // the sums back from x's scale
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const float unscale = 1.f / factor[min(q + kTileTokens * p, tokens - 1)]; // a power of two: exact
      t0[p] *= unscale, t8[p] *= unscale;
    }
  }
  finish<P>(a, begin, tokens, sp, t0, t8);
}

// CTAs per SM the registers are capped for: 3 (80 registers) on sm_90, whose ptxas keeps the
// loop free of spills there; other architectures' ptxas spills at 80 (12-36 bytes on sm_89 and
// sm_120a), so they get 2 (no table routes to it there; ninfer-tune may measure it).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ != 900
constexpr int kMinCtasPerSm = 2;
#else
constexpr int kMinCtasPerSm = 3;
#endif
// The _t8 and _t16 kernels (two and four column tiles: more accumulators and x fragments) at 2
// CTAs per SM.
constexpr int kMinCtasPerSm8 = 2;

// A format's kernels, in LeanDef::kernels()'s order: its .cu file defines FORMS(SD_NAME, SD, P,
// PNAME, CTAS, CT, LNAME), the kernels of one scale dtype, tile count and code layout, and
// NINFER_GEMV_LEAN_KERNELS(FORMS) makes them all; ENTRIES(SD_NAME, PNAME, LNAME) lists them the
// same way for NINFER_GEMV_LEAN_ENTRIES(ENTRIES).
#define NINFER_GEMV_LEAN_SCALES(FORMS, P, PNAME, CTAS, CT, LNAME)                                 \
  FORMS(f32, NINFER_DTYPE_F32, P, PNAME, CTAS, CT, LNAME)                                         \
  FORMS(bf16, NINFER_DTYPE_BF16, P, PNAME, CTAS, CT, LNAME) FORMS(f16, NINFER_DTYPE_F16, P, PNAME, CTAS, CT, LNAME)
#define NINFER_GEMV_LEAN_TILE_COUNTS(FORMS, CT, LNAME)                                             \
  NINFER_GEMV_LEAN_SCALES(FORMS, 1, , kMinCtasPerSm, CT, LNAME)                                   \
  NINFER_GEMV_LEAN_SCALES(FORMS, 2, _t8, kMinCtasPerSm8, CT, LNAME)                               \
  NINFER_GEMV_LEAN_SCALES(FORMS, 4, _t16, kMinCtasPerSm8, CT, LNAME)
#define NINFER_GEMV_LEAN_KERNELS(FORMS) \
  NINFER_GEMV_LEAN_TILE_COUNTS(FORMS, false, ) NINFER_GEMV_LEAN_TILE_COUNTS(FORMS, true, _tiled)
#define NINFER_GEMV_LEAN_LAYOUT_ENTRIES(ENTRIES, LNAME)                                              \
  ENTRIES(f32, , LNAME), ENTRIES(bf16, , LNAME), ENTRIES(f16, , LNAME), ENTRIES(f32, _t8, LNAME),     \
      ENTRIES(bf16, _t8, LNAME), ENTRIES(f16, _t8, LNAME), ENTRIES(f32, _t16, LNAME), ENTRIES(bf16, _t16, LNAME), \
      ENTRIES(f16, _t16, LNAME)
#define NINFER_GEMV_LEAN_ENTRIES(ENTRIES) \
  NINFER_GEMV_LEAN_LAYOUT_ENTRIES(ENTRIES, ), NINFER_GEMV_LEAN_LAYOUT_ENTRIES(ENTRIES, _tiled)

} // namespace ninfer::cuda_plugin::gemv_lean

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin::gemv_lean {

// The variant of format F (its .cu file gives the kernels, in kernels()'s order: code layout
// major (row-major, tiles), then tile count (1-4, 5-8, 9-16 tokens), then scale dtype (f32, bf16,
// f16), then zeros (without, with: formats with zero points), then group form (g128, groups)).
template <class F>
struct LeanDef {
  static constexpr bool kInt4 = std::is_same_v<F, Int4>;
  static constexpr const char* name = kInt4 ? "gemv_int4_lean" : "gemv_fp8_lean";
  static constexpr int32_t code_dtype = kInt4 ? NINFER_DTYPE_INT4 : NINFER_DTYPE_FP8_E4M3;
  static constexpr int kMaxTickets = NINFER_LAUNCH_TICKETS; // one per row block of a cut K
  static constexpr int threads = kThreads;
  static constexpr int tokens_per_cta = kMaxTokens;
  static constexpr int launch_tokens = kMaxTokens;       // a call of more: launches of 16
  static constexpr int kMaxCallTokens = 4 * kMaxTokens;  // the codes streamed at most 4 times
  static constexpr int kZeroForms = F::kZeroPoints ? 2 : 1;
  static constexpr int kPerTiles = 3 * kZeroForms * 2;
  static constexpr int kPerLayout = 3 * kPerTiles;
  static constexpr int kernel_count = 2 * kPerLayout;
  static constexpr bool reads_code_tiles = true;
  static constexpr uint32_t dtype_mask = 1u << code_dtype;
  static const QuantKernel* kernels();

  static int pick(const ninfer_linear_args& a, const ninfer_launch& l) {
    const int32_t sd = a.wq->scale_dtype;
    const int sd_index = sd == NINFER_DTYPE_F32 ? 0 : sd == NINFER_DTYPE_BF16 ? 1 : 2;
    const int t = tokens(l);
    const int tiles = t > 2 * kTileTokens ? 2 : t > kTileTokens ? 1 : 0;
    const int layout = a.wq->layout == NINFER_QUANT_LAYOUT_TILES16 ? 1 : 0;
    return layout * kPerLayout + tiles * kPerTiles + sd_index * kZeroForms * 2 + (a.wq->zeros ? 2 : 0) +
           (a.wq->group_size == kStepK ? 0 : 1);
  }
  static int tokens(const ninfer_launch& l) { return static_cast<int>(l.token_end - l.token_begin); }
  // The most shared memory a launch of up to `tokens` tokens of the shape takes.
  static size_t smem_for(int64_t K, int64_t N, int64_t tokens) {
    long long most = 0;
    for (int t = 1; t <= tokens && t <= kMaxTokens; ++t) most = std::max(most, smem_bytes(K, N, t));
    return static_cast<size_t>(most);
  }
  // 1-64 tokens (launches of up to 16), whole 128-k steps, groups of whole steps or one per row
  // (group: the planning group, 0 for g_idx), and a merge ticket per row block where K is cut.
  static int32_t takes(int64_t T, int64_t K, int64_t N, int64_t group) {
    if (T < 1 || T > kMaxCallTokens || K < kStepK || K % kStepK != 0 || N < 1 || K > INT32_MAX || N > INT32_MAX)
      return 0;
    if (group < 1 || (group % kStepK != 0 && group < K)) return 0;
    if (N * ((K + group - 1) / group) > INT32_MAX) return 0; // 32-bit scale and zero indices
    for (int t = 1; t <= T && t <= kMaxTokens; ++t)
      if (k_chunks(K, N, t) > 1 && (N + kRows - 1) / kRows > kMaxTickets) return 0;
    return 1;
  }
  static const char* invalid(const ninfer_linear_args& a) {
    if (a.w_dtype != code_dtype) return kInt4 ? "takes INT4 weights only" : "takes FP8_E4M3 weights only";
    if (a.in_features % kStepK != 0) return "in_features must be a multiple of 128";
    if (a.wq->g_idx) return "takes no g_idx (gemv_quant_warp_* do)";
    if (a.wq->group_size % kStepK != 0 && a.wq->group_size < a.in_features)
      return "group_size must be a multiple of 128 or >= in_features";
    if (reinterpret_cast<uintptr_t>(a.w) % 16 != 0) return "w must be 16-byte aligned";
    return nullptr;
  }
  static const char* invalid_launch(const ninfer_linear_args& a, const ninfer_launch& l) {
    const int t = tokens(l);
    if (t < 1 || t > kMaxTokens) return "takes launches of 1 to 16 tokens";
    if (static_cast<size_t>(smem_bytes(a.in_features, a.out_features, t)) > l.dynamic_smem_bytes)
      return "the launch's dynamic shared memory is less than the shape's x needs";
    if (k_chunks(a.in_features, a.out_features, t) == 1) return nullptr;
    if ((a.out_features + kRows - 1) / kRows > kMaxTickets)
      return "more row blocks with a cut K than the backend has merge tickets";
    if (!l.tickets) return "a cut K needs the backend's launch tickets (ninfer_launch.tickets)";
    if (!l.workspace || l.workspace_bytes < partial_bytes(a.in_features, a.out_features, t))
      return "workspace too small for the K chunks' partial sums";
    return nullptr;
  }
  static size_t partial_bytes(int64_t K, int64_t N, int tokens) {
    const int ks = k_chunks(K, N, tokens);
    return ks > 1 ? sizeof(float) * static_cast<size_t>(ks) * static_cast<size_t>(tokens) * static_cast<size_t>(N) : 0;
  }
  static size_t dynamic_smem(const void*, const ninfer_shape* s) { return smem_for(s->dims[0], s->dims[1], s->tokens); }
  static size_t workspace(const void*, const ninfer_shape* s, int64_t tokens_in_launch) {
    size_t most = 0;
    const int64_t T = tokens_in_launch > 0 ? tokens_in_launch : s->tokens;
    for (int t = 1; t <= T && t <= kMaxTokens; ++t) most = std::max(most, partial_bytes(s->dims[0], s->dims[1], t));
    return most;
  }
  static Split extra(const ninfer_linear_args& a, const ninfer_launch& l) {
    return {static_cast<float*>(l.workspace), l.tickets, k_chunks(a.in_features, a.out_features, tokens(l))};
  }
  // Row blocks of kRows rows by K chunks.
  static dim3 grid(const ninfer_linear_args& a, const ninfer_launch& l) {
    return dim3(static_cast<unsigned>((a.out_features + kRows - 1) / kRows),
                static_cast<unsigned>(k_chunks(a.in_features, a.out_features, tokens(l))));
  }
  // dims[2]: the planning group (linear.h).
  static int32_t supports(const void*, const ninfer_shape* s) { return takes(s->tokens, s->dims[0], s->dims[1], s->dims[2]); }
};

} // namespace ninfer::cuda_plugin::gemv_lean
#endif // __CUDACC_RTC__
