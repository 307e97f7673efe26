// gemv_int4_lean: linear (linear/linear_gemv_int4_lean.cu) and norm_linear
// (linear/norm_linear_gemv_int4_lean.cu) on int4 weights (the canonical layout of
// ninfer/abi/ops/quant_weight.h), 1-4 tokens, on the tensor cores. Decode must stream the codes
// at the memory's rate, and at the copy rate an SM takes in ~26 (H100) to ~37 (H200) int4 codes
// per cycle against the 4 warp instructions it can issue, so everything that is not the decode
// of a code is taken out of the K loop or specialized away. Its step loop issues 1.79-1.90 SASS instructions per code and lane
// with groups of 128 (1.91-2.04 with larger groups; sm_90, cuobjdump), for 1 to 4 tokens alike,
// where gemv_quant_mma's issues 2.7 at one token and its split form 6 (docs/quantization.md):
//   - x is read, split into bf16 hi + lo and stored once per CTA, in shared memory, already in
//     the MMA's B-fragment order: a lane's whole B operand of a step is 4 ld.shared.v4, and the
//     MMA's 8 columns are (token, hi) and (token, lo) for up to 4 tokens, so one MMA per 16 k
//     takes both halves of x of every token (x keeps float32 accuracy; columns past 2T read a
//     copy of the last one and feed outputs that are never stored);
//   - a warp owns one 16-row tile and the CTA's whole stretch of K; each step a lane decodes the
//     16 code bytes of its rows g and g + 8 (a 64-byte step of 128 k per row): per 32-bit word,
//     3 shifts, 4 lop3 (nibbles i and i + 4 under bf16 128.0's exponent: 128 + u) and 4 bf16x2
//     subtractions of 128 + zero (exact: u - zero is a small integer), feeding two MMAs. That is
//     11 instructions per 8 codes; the word's nibble pairs sit at bit offsets 0, 4, 8 and 12 of
//     each half and bf16 has 7 mantissa bits, so no layout of the nibbles needs fewer shifts;
//   - a step is one quantization group (the g128 kernels) or within one (group a multiple of
//     128, or one group per row: a step counter, no division), so its MMAs sum (u - zero) * x in
//     float32 and one FMA per row applies the group's scale: w = (u - zero) * scale exactly as
//     the contract defines it, never rounded;
//   - the first kAhead steps' codes are loaded before the launch wait (weights: no kernel of the
//     step writes them), so a CTA placed while the previous kernel drains starts its stream at
//     once (+2.6% decode at batch 1, 27B int4, H100);
//   - the codes of kAhead steps are in flight in registers (16-byte ld.global.nc, no L1
//     allocation) while a step is computed, in a ring of kAhead + 1 buffers that a fully
//     unrolled round walks (a load goes to the buffer the previous step freed: no copies); the
//     scales and zeros are loaded by the step that uses them (L1 hits after a row's first);
//     addresses advance by pointer increments once per round, the steps use immediate offsets;
//   - one kernel per scale dtype, zeros or not, and group form (12), so a step has no branch on
//     any of them; the token count (1-4) costs nothing inside the loop (each lane reads one
//     B column whatever the count) and is a launch argument;
//   - the K chunks: a CTA is 8 warps = 128 rows; where N alone gives fewer than kTargetCtas CTAs
//     (5,120-row projections: 40), K is cut into chunks (grid.y) whose partial sums meet in the
//     launch workspace through the backend's launch tickets (the last CTA of a row block adds
//     them in chunk order: deterministic), as the split-key decode does (attention/decode_merge.cuh).
//   - norm_linear (struct Norm below) stages x normed and forms SwiGLU in the CTA.
// Shapes it takes: int4, 1-4 tokens, K a multiple of 128, group a multiple of 128 or >= K, no
// g_idx (the planning group: linear's dims[2], norm_linear's dims[3]); the rest goes to the
// other quantized variants.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/grid_dependency.cuh"
#include "common/pointwise_math.cuh"
#include "linear/linear_gemv_mma_bf16.cuh"
#include "linear/quant_common.cuh"
#include "linear/quant_mma_fragments.cuh"

namespace ninfer::cuda_plugin::gemv_int4_lean {

using namespace quant;
using gemv_bf16::bf16_hi;
using gemv_bf16::bf16_lo;
using gemv_bf16::load_stream;
using gemv_bf16::pack_bf16;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kRows = 16 * kWarps;      // rows per CTA: one 16-row MMA tile per warp
constexpr int kMaxTokens = 4;           // MMA columns (token, hi) and (token, lo)
static_assert(2 * kMaxTokens <= 8, "the MMA has 8 columns");
constexpr int kStepK = 128;             // k per warp step: 4 lane quarters x 32 codes
constexpr int kStepBytes = kStepK / 2;  // code bytes per row and step
constexpr int kAhead = 2;               // steps of codes in flight while one is computed (3 at 80
                                        // registers spill; 3 CTAs x 8 warps x 2 KB in flight per SM)
constexpr int kStepXBytes = 4 * 4 * 16; // one B column of a step: 4 words x 4 quarters x 16 bytes
constexpr int kColumnPad = 64;          // columns 2t and 2t + 1 start 64 bytes apart mod 128: no bank conflict
constexpr int kTargetCtas = 384;        // CTAs a launch aims for (a property of the shape: ~3 per SM)
constexpr int kMinSteps = 8;            // steps per chunk, at least, when K is cut for more CTAs

// Steps of one CTA's chunk of K, at most: its x (4 bytes per k and token) stays within 64 KB of
// shared memory, so 3 CTAs fit on an SM at 4 tokens.
__host__ __device__ constexpr int max_chunk_steps(int tokens) { return 128 / tokens; }

// Chunks K is cut into (grid.y): as few as shared memory allows, then more while the launch has
// fewer than kTargetCtas CTAs and every chunk keeps kMinSteps steps.
__host__ __device__ constexpr int k_chunks(long long K, long long N, int tokens) {
  const int steps = static_cast<int>(K / kStepK);
  const long long blocks = (N + kRows - 1) / kRows;
  int ks = (steps + max_chunk_steps(tokens) - 1) / max_chunk_steps(tokens);
  while (ks < steps && blocks * (ks + 1) <= kTargetCtas && steps / (ks + 1) >= kMinSteps) ++ks;
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

// norm_linear's part (ninfer/abi/ops/norm_linear.h): x is RMS-normalised by w as it is staged
// (every CTA sums the squares of its tokens' whole rows: L2 reads, while its first codes are in
// flight), the normed rows are written by the CTAs of row block 0 (each its chunk of K), and
// gated, a CTA's warps 0-3 take 64 gate rows and warps 4-7 the matching up rows, so y = silu(gate)
// * up is formed in the CTA (or by its row block's merge) and the projection never goes to memory.
struct Norm {
  const float* w; // nullptr: a plain linear
  float eps, offset;
  float* normed; // may be nullptr
  long long normed_stride;
  int gated;
};

// norm_linear's kernel parameter: the K chunks' meeting place and the norm.
struct NormSplit {
  Split split;
  Norm norm;
};

// The weight row of the CTA's row L (0 .. kRows - 1): a plain CTA's are kRows consecutive rows;
// a gated one's, output o = kRows / 2 * block + (L mod kRows / 2): its gate row o (L < kRows / 2)
// or its up row N / 2 + o. `out` is the output the row feeds (its y column).
struct BlockRow {
  long long row, out;
};
__device__ __forceinline__ BlockRow block_row(const Args& a, bool gated, int L) {
  if (!gated) {
    const long long r = static_cast<long long>(blockIdx.x) * kRows + L;
    return {r, r};
  }
  constexpr int kHalf = kRows / 2;
  const long long o = static_cast<long long>(blockIdx.x) * kHalf + (L & (kHalf - 1));
  return {L < kHalf ? o : a.N / 2 + o, o};
}
// Outputs (y columns) of the launch: rows, or gated, half of them.
__device__ __forceinline__ long long outputs(const Args& a, bool gated) { return gated ? a.N / 2 : a.N; }

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

// One step's codes of a lane: 16 bytes of rows g (c0) and g + 8 (c8), in flight in registers
// kAhead steps before their turn.
struct Codes {
  uint4 c0, c8;
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

// The codes of the step u past r's code pointers (u a constant once unrolled: immediate offsets).
__device__ __forceinline__ Codes load_codes(const Rows& r, int u) {
  return {load_stream(reinterpret_cast<const uint4*>(r.c0 + u * kStepBytes)),
          load_stream(reinterpret_cast<const uint4*>(r.c8 + u * kStepBytes))};
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

// One step of one lane: the 8 MMAs of its rows' 128 k against x's B fragments at shared address
// xa, then the step's sums times their group's scales into t0 (row g) and t8 (row g + 8), token q.
template <int SD, bool kZeros>
__device__ __forceinline__ void compute_step(const Codes& c, const Terms<SD, kZeros>& z, u32 xa, float& t0,
                                             float& t8) {
  // 128 + zero in both bf16 halves: symmetric weights' zero is 8.
  const u32 b0 = kZeros ? z.z0 * 0x10001u + 0x43004300u : 0x43084308u;
  const u32 b8 = kZeros ? z.z8 * 0x10001u + 0x43004300u : 0x43084308u;
  float acc[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) { // word j: the quarter's k 8j .. 8j + 7; B = x (0,4) (1,5) (2,6) (3,7)
    const uint4 xv = lds16(xa + j * 64);
    const u32 w0 = (&c.c0.x)[j], w8 = (&c.c8.x)[j];
    const u32 lo[4] = {int4_pair(w0, 0, b0), int4_pair(w8, 0, b8), int4_pair(w0, 1, b0), int4_pair(w8, 1, b8)};
    if (j == 0) mma_first(acc, lo, xv.x, xv.y);
    else mma(acc, lo, xv.x, xv.y);
    const u32 hi[4] = {int4_pair(w0, 2, b0), int4_pair(w8, 2, b8), int4_pair(w0, 3, b0), int4_pair(w8, 3, b8)};
    mma(acc, hi, xv.z, xv.w);
  }
  // acc: rows g (0, 1) and g + 8 (2, 3) of columns 2q (x hi) and 2q + 1 (x lo) = token q.
  t0 = fmaf(Scale<SD>::value(z.s0), acc[0] + acc[1], t0);
  t8 = fmaf(Scale<SD>::value(z.s8), acc[2] + acc[3], t8);
}

// The inverse RMS of each token's whole row (norm_linear) into inv[t]: every thread a strided
// share of the squares, then a sum over the warps. Ends with a barrier.
__device__ __forceinline__ void inverse_rms(const Args& a, long long begin, int tokens, float eps, float* inv) {
  __shared__ float part[kWarps][kMaxTokens];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int t = 0; t < tokens; ++t) {
    const float* x = a.x + (begin + t) * a.x_stride;
    float ss = 0.f;
    for (int k = threadIdx.x; k < a.K; k += kThreads) {
      const float v = __ldg(x + k);
      ss = fmaf(v, v, ss);
    }
    ss = warp_sum(ss);
    if (lane == 0) part[warp][t] = ss;
  }
  __syncthreads();
  if (threadIdx.x < tokens) {
    float ss = 0.f;
    for (int w = 0; w < kWarps; ++w) ss += part[w][threadIdx.x];
    inv[threadIdx.x] = rsqrtf(ss / a.K + eps);
  }
  __syncthreads();
}

// x rows [begin, begin + tokens) over steps [st0, st0 + n) into shared memory as B fragments:
// column 2t (hi) and 2t + 1 (lo) of token t, each `col` bytes; within a column, step s, word j,
// lane quarter q at s * kStepXBytes + 64 j + 16 q holds the bf16 pairs (x0, x4) (x1, x5) (x2, x6)
// (x3, x7) of k = 128 s + 32 q + 8 j + [0, 8), the order in which the word's nibbles decode.
// With a norm (nm.w), x[k] is staged as x[k] inv[t] s[k] (the normed row, also written to
// nm.normed by row block 0).
__device__ __forceinline__ void stage_x(const Args& a, long long begin, int tokens, int st0, int n, int col,
                                        const Norm& nm, const float* inv, unsigned char* xs) {
  // Half a word's x per thread and round: (x[2h], x[2h + 4]) and (x[2h + 1], x[2h + 5]), 8 bytes
  // of each column (few registers: the first codes are in flight meanwhile).
  const bool vec = a.x_stride % 2 == 0 && reinterpret_cast<unsigned long long>(a.x) % 8 == 0;
  const bool normed = nm.w && nm.normed && blockIdx.x == 0;
  const int units = n * 32; // half words per token
  for (int i = threadIdx.x; i < tokens * units; i += kThreads) {
    const int t = i / units, u = i - t * units;
    const int h = u & 1, q = (u >> 1) & 3, j = (u >> 3) & 3, s = u >> 5;
    const long long k = static_cast<long long>(st0 + s) * kStepK + 32 * q + 8 * j + 2 * h;
    const float* src = a.x + (begin + t) * a.x_stride + k;
    float2 lo4, hi4; // x[2h], x[2h + 1] and x[2h + 4], x[2h + 5]
    if (vec) {
      lo4 = __ldg(reinterpret_cast<const float2*>(src)), hi4 = __ldg(reinterpret_cast<const float2*>(src + 4));
    } else {
      lo4 = make_float2(__ldg(src), __ldg(src + 1)), hi4 = make_float2(__ldg(src + 4), __ldg(src + 5));
    }
    if (nm.w) {
      const float r = inv[t];
      lo4.x *= r * (__ldg(nm.w + k) + nm.offset), lo4.y *= r * (__ldg(nm.w + k + 1) + nm.offset);
      hi4.x *= r * (__ldg(nm.w + k + 4) + nm.offset), hi4.y *= r * (__ldg(nm.w + k + 5) + nm.offset);
      if (normed) {
        float* dst = nm.normed + (begin + t) * nm.normed_stride + k;
        dst[0] = lo4.x, dst[1] = lo4.y, dst[4] = hi4.x, dst[5] = hi4.y;
      }
    }
    const u32 h0 = pack_bf16(lo4.x, hi4.x), h1 = pack_bf16(lo4.y, hi4.y);
    const u32 l0 = pack_bf16(lo4.x - bf16_lo(h0), hi4.x - bf16_hi(h0));
    const u32 l1 = pack_bf16(lo4.y - bf16_lo(h1), hi4.y - bf16_hi(h1));
    const int off = s * kStepXBytes + 64 * j + 16 * q + 8 * h;
    *reinterpret_cast<uint2*>(xs + (2 * t) * col + off) = make_uint2(h0, h1);
    *reinterpret_cast<uint2*>(xs + (2 * t + 1) * col + off) = make_uint2(l0, l1);
  }
}

// Token t's output o from its sums: gated, silu(gate) * up.
__device__ __forceinline__ void store_y(const Args& a, long long begin, int t, long long o, float v) {
  float* y = a.y + (begin + t) * a.y_stride + o;
  *y = a.accumulate ? *y + v : v;
}

// y (or the chunk's partials) of the CTA's rows: lane (g, q) holds token q of its warp's rows g
// (t0) and g + 8 (t8). Gated, the up rows' sums meet their gate rows' in shared memory. With a
// cut K, the CTA that takes its row block's ticket last adds the chunks' partials in chunk order.
__device__ __forceinline__ void finish(const Args& a, long long begin, int tokens, const Split& sp, bool gated,
                                       float t0, float t8) {
  constexpr int kHalf = kRows / 2;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const int L0 = 16 * warp + g, L8 = L0 + 8;
  const BlockRow b0 = block_row(a, gated, L0), b8 = block_row(a, gated, L8);
  const long long outs = outputs(a, gated);
  if (sp.ks == 1) {
    if (!gated) {
      if (q >= tokens) return;
      if (b0.out < outs) store_y(a, begin, q, b0.out, t0);
      if (b8.out < outs) store_y(a, begin, q, b8.out, t8);
      return;
    }
    __shared__ float up[kMaxTokens][kHalf];
    if (L0 >= kHalf && q < tokens) up[q][L0 - kHalf] = t0, up[q][L8 - kHalf] = t8;
    __syncthreads();
    if (L0 >= kHalf || q >= tokens) return;
    if (b0.out < outs) store_y(a, begin, q, b0.out, silu(t0) * up[q][L0]);
    if (b8.out < outs) store_y(a, begin, q, b8.out, silu(t8) * up[q][L8]);
    return;
  }
  const long long chunk_stride = static_cast<long long>(tokens) * a.N;
  if (q < tokens) {
    float* p = sp.partials + blockIdx.y * chunk_stride + static_cast<long long>(q) * a.N;
    if (b0.out < outs) p[b0.row] = t0;
    if (b8.out < outs) p[b8.row] = t8;
  }
  __shared__ bool last;
  __threadfence(); // this CTA's partials before its ticket
  __syncthreads();
  if (threadIdx.x == 0) last = atomicInc(&sp.tickets[blockIdx.x], static_cast<unsigned>(sp.ks - 1)) == sp.ks - 1;
  __syncthreads();
  if (!last) return;
  __threadfence(); // the merge's reads after the other chunks' tickets
  // A row's sum over the chunks, in chunk order: deterministic.
  auto sum = [&](int t, long long row) {
    const float* p = sp.partials + static_cast<long long>(t) * a.N + row;
    float v = 0.f;
    for (int c = 0; c < sp.ks; ++c) v += __ldcg(p + c * chunk_stride);
    return v;
  };
  const int per_token = gated ? kHalf : kRows; // outputs of the block
  for (int e = threadIdx.x; e < tokens * per_token; e += kThreads) {
    const int t = e / per_token, L = e - t * per_token;
    const BlockRow b = block_row(a, gated, L);
    if (b.out >= outs) continue;
    store_y(a, begin, t, b.out, gated ? silu(sum(t, b.row)) * sum(t, block_row(a, true, L + kHalf).row) : sum(t, b.row));
  }
}

// kNorm: norm_linear (nm), else a plain linear (nm unused).
template <int SD, bool kZeros, bool kG128, bool kNorm>
__device__ void gemv(const Args& a, long long begin, long long end, const Split& sp, const Norm& nm) {
  extern __shared__ __align__(16) unsigned char xs[];
  const int tokens = static_cast<int>(end - begin);
  const int steps = a.K / kStepK;
  const int st0 = static_cast<int>(static_cast<long long>(blockIdx.y) * steps / sp.ks);
  const int n = static_cast<int>(static_cast<long long>(blockIdx.y + 1) * steps / sp.ks) - st0;
  const int col = column_bytes(a.K, sp.ks);

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const bool gated = kNorm && nm.gated;
  const long long last_row = a.N - 1; // rows past the outputs read row N - 1: in bounds, never stored
  const long long rg = min(block_row(a, gated, 16 * warp + g).row, last_row);
  const long long r8 = min(block_row(a, gated, 16 * warp + g + 8).row, last_row);
  // The group of the chunk's first step and how far into it (the general form's counter).
  const int per_group = a.group_size >= a.K ? steps + 1 : a.group_size / kStepK; // steps + 1: never reached
  const int group0 = kG128 ? st0 : st0 / per_group;
  int in_group = kG128 ? 0 : st0 - group0 * per_group;
  Rows r;
  r.c0 = a.w + rg * a.row_bytes + static_cast<long long>(st0) * kStepBytes + 16 * q;
  r.c8 = a.w + r8 * a.row_bytes + static_cast<long long>(st0) * kStepBytes + 16 * q;
  r.t0 = static_cast<int>(rg * a.groups) + group0; // N * G < 2^31 (supports)
  r.t8 = static_cast<int>(r8 * a.groups) + group0;
  // This lane's B column (g; past the launch's 2 tokens columns, a copy of the last one).
  u32 xa = static_cast<u32>(__cvta_generic_to_shared(xs)) + min(g, 2 * tokens - 1) * col + 16 * q;

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

  // kRing code buffers: the step computed and kAhead steps in flight. The load of a step goes
  // to the buffer the previous step freed, so no buffer is copied.
  constexpr int kRing = kAhead + 1;
  Codes ring[kRing];
#pragma unroll
  for (int u = 0; u < kAhead; ++u)
    if (u < n) ring[u] = load_codes(r, u);
  // The codes are weights, which no kernel of the step writes: they are loaded before the launch
  // wait, while the previous kernel finishes (common/grid_dependency.cuh); x is its output.
  grid_dependency_prologue();
  // x while the first codes are in flight (normed: the whole rows' RMS first).
  __shared__ float inv[kMaxTokens];
  if constexpr (kNorm) inverse_rms(a, begin, tokens, nm.eps, inv);
  stage_x(a, begin, tokens, st0, n, col, kNorm ? nm : Norm{}, inv, xs);
  __syncthreads();

  // One step: the load of step v + kAhead (where `more`), then step v's terms (L1 hits after a
  // row's first: the zeros are needed at once, the scales only after the MMAs) and MMAs.
  float t0 = 0.f, t8 = 0.f;
  auto step = [&](int v, bool more) {
    if (more) ring[(v + kAhead) % kRing] = load_codes(r, v + kAhead);
    const Terms<SD, kZeros> terms = load_terms<SD, kZeros>(a, r, kG128 ? v : 0);
    if constexpr (!kG128) next_terms(1);
    compute_step<SD, kZeros>(ring[v % kRing], terms, xa + v * kStepXBytes, t0, t8);
  };
  int s = 0;
  // While every load of a round of kRing steps is a step of the chunk, a step is straight-line code.
  for (; s + kRing + kAhead <= n; s += kRing) {
#pragma unroll
    for (int u = 0; u < kRing; ++u) step(u, true);
    r.c0 += kRing * kStepBytes, r.c8 += kRing * kStepBytes;
    if constexpr (kG128) next_terms(kRing);
    xa += kRing * kStepXBytes;
  }
  // The last steps (fewer than kRing + kAhead), each load only where its step is in the chunk.
#pragma unroll
  for (int v = 0; v < kRing + kAhead - 1; ++v)
    if (s + v < n) step(v, s + v + kAhead < n);
  finish(a, begin, tokens, sp, gated, t0, t8);
}

// CTAs per SM the registers are capped for: 3 (80 registers) on sm_90, whose ptxas keeps the
// loop free of spills there; other architectures' ptxas spills at 80 (12-36 bytes on sm_89 and
// sm_120a), so they get 2 (no table routes to it there; ninfer-tune may measure it).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ != 900
constexpr int kMinCtasPerSm = 2;
#else
constexpr int kMinCtasPerSm = 3;
#endif

} // namespace ninfer::cuda_plugin::gemv_int4_lean

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include <algorithm>

#include "linear/quant_variant.hpp"

namespace ninfer::cuda_plugin::gemv_int4_lean {

// What the linear and norm_linear variants share: the kernel choice, the shapes taken, the
// launch's shared memory, workspace, tickets and grid. A Def adds its op, name and kernels.
struct DefBase {
  static constexpr int kMaxTickets = NINFER_LAUNCH_TICKETS; // one per row block of a cut K
  static constexpr const char* name = "gemv_int4_lean";
  static constexpr int threads = kThreads;
  static constexpr int tokens_per_cta = kMaxTokens;
  static constexpr uint32_t dtype_mask = 1u << NINFER_DTYPE_INT4;
  // Scale dtype major (f32, bf16, f16), then zeros (without, with), then group form (g128, groups).
  static constexpr int kernel_count = 12;
  template <class A>
  static int pick(const A& a, const ninfer_launch&) {
    const int32_t sd = a.wq->scale_dtype;
    const int sd_index = sd == NINFER_DTYPE_F32 ? 0 : sd == NINFER_DTYPE_BF16 ? 1 : 2;
    return sd_index * 4 + (a.wq->zeros ? 2 : 0) + (a.wq->group_size == kStepK ? 0 : 1);
  }
  static int tokens(const ninfer_launch& l) { return static_cast<int>(l.token_end - l.token_begin); }
  // The most shared memory a launch of up to `tokens` tokens of the shape takes.
  static size_t smem_for(int64_t K, int64_t N, int64_t tokens) {
    long long most = 0;
    for (int t = 1; t <= tokens && t <= kMaxTokens; ++t) most = std::max(most, smem_bytes(K, N, t));
    return static_cast<size_t>(most);
  }
  // 1-4 tokens, whole 128-k steps, groups of whole steps or one per row (group: the planning
  // group, 0 for g_idx), and a merge ticket per row block where K is cut.
  static int32_t takes(int64_t T, int64_t K, int64_t N, int64_t group) {
    if (T < 1 || T > kMaxTokens || K < kStepK || K % kStepK != 0 || N < 1 || K > INT32_MAX || N > INT32_MAX) return 0;
    if (group < 1 || (group % kStepK != 0 && group < K)) return 0;
    if (N * ((K + group - 1) / group) > INT32_MAX) return 0; // 32-bit scale and zero indices
    for (int t = 1; t <= T; ++t)
      if (k_chunks(K, N, t) > 1 && (N + kRows - 1) / kRows > kMaxTickets) return 0;
    return 1;
  }
  template <class A>
  static const char* invalid_weights(const A& a) {
    if (a.w_dtype != NINFER_DTYPE_INT4) return "takes INT4 weights only";
    if (a.in_features % kStepK != 0) return "in_features must be a multiple of 128";
    if (a.wq->g_idx) return "takes no g_idx (gemv_quant_warp_* do)";
    if (a.wq->group_size % kStepK != 0 && a.wq->group_size < a.in_features)
      return "group_size must be a multiple of 128 or >= in_features";
    if (reinterpret_cast<uintptr_t>(a.w) % 16 != 0) return "w must be 16-byte aligned";
    return nullptr;
  }
  template <class A>
  static const char* invalid_launch(const A& a, const ninfer_launch& l) {
    const int t = tokens(l);
    if (t < 1 || t > kMaxTokens) return "takes launches of 1 to 4 tokens";
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
  template <class A>
  static Split split(const A& a, const ninfer_launch& l) {
    return {static_cast<float*>(l.workspace), l.tickets, k_chunks(a.in_features, a.out_features, tokens(l))};
  }
  // Row blocks of kRows rows (gated: of kRows / 2 outputs, the same count for an even N) by K chunks.
  template <class A>
  static dim3 grid(const A& a, const ninfer_launch& l) {
    return dim3(static_cast<unsigned>((a.out_features + kRows - 1) / kRows),
                static_cast<unsigned>(k_chunks(a.in_features, a.out_features, tokens(l))));
  }
};

} // namespace ninfer::cuda_plugin::gemv_int4_lean
#endif // __CUDACC_RTC__
