// linear on quantized weights (INT4, INT8, FP8_E4M3 in the canonical layout of
// ninfer/abi/ops/quant_weight.h), decode-sized, on the tensor cores: gemv_quant_mma, up to 8
// tokens per tile, every code byte read once per tile. The bf16 GEMV's design
// (linear/linear_gemv_mma_bf16.cuh) with the dequantization in front of its MMAs:
//   - a warp owns 16 * kMR rows and one stretch of the reduction; each step, each lane copies 16
//     bytes of codes of two rows (rows g and g + 8 of each 16-row tile) into its warp's ring in
//     shared memory with cp.async (L2 only, 256-byte prefetch hint), kStages - 1 steps ahead of
//     the one it computes on, so the loads stay in flight through the dequantization and MMAs
//     without holding registers (loads into registers measured 1.1-1.2 TB/s of the H100's 3.0);
//   - a step is 64 bytes of every row (128 int4 or 64 int8 / fp8 codes: one lane quarter each),
//     so it lies in one quantization group when group_size is a multiple of it (or the row is
//     one group): its MMAs sum (code - zero) * x over the step in float32, and the step's sum is
//     multiplied by the group's scale before it joins the row's total. The dequantized weight is
//     never rounded: (u - zero) is an integer of at most 9 bits and e4m3 values have 4, both
//     exact in bf16, and the scale is applied in float32 as the contract's w = (u - zero) * scale;
//   - int4 codes become bf16 pairs with one mask (nibbles i and i + 4 of a word under the
//     exponent of 128, so the pair is 128 + u) and one bf16x2 subtraction of 128 + zero; int8
//     codes go through float32 (2^23 + u, minus 2^23 + zero) and fp8 through the hardware e4m3
//     conversion, then a bf16x2 pack;
//   - a dot product may take its k terms in any order, so each lane's codes fill the MMA's k
//     slots in the order they decode, and x (the B fragment) is read in the same order, split
//     into bf16 hi + lo so x keeps float32 accuracy;
//   - the CTA's 8 warps split the reduction S ways (from the shape alone) and meet in shared
//     memory in a fixed order (deterministic), as the bf16 kernel does.
// The warp's instruction stream is what bounds this kernel (the H100's ncu: 8-9 cycles per issued
// instruction at 16 warps per SM, DRAM 22-37% busy), so a step is straight-line code: one kernel
// per code type, token form and x alignment (no branch inside a step), a step's group from
// counters (no division), a row's scale and zero loaded once per warp and shuffled to its lanes,
// and no more x splits and MMAs than the token count needs:
//   - up to 4 tokens ("column pairs"): the MMA's 8 columns are (token, hi) and (token, lo) pairs,
//     so one MMA per k slice takes both halves of x (half the MMAs of the split form), and for 1
//     or 2 tokens, where most columns are empty, the lanes share the split work: each lane splits
//     the x of one slice per round and the lanes that need it read it with a shuffle (1 token,
//     int4: 4 splits of two values per lane and step instead of 16);
//   - 5-8 tokens ("split"): columns are tokens, each lane splits its own token's x, and hi and
//     lo go through separate MMAs.
// Shapes it takes: K a multiple of the step (128 for int4, 64 otherwise), group_size a multiple
// of the step or >= K, no g_idx (the planning shape's dims[2], linear.h). Anything else runs
// gemv_quant_warp_* (linear/linear_gemv_quant.cu).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/cp_async.cuh"
#include "common/grid_dependency.cuh"
#include "linear/linear_gemv_mma_bf16.cuh"
#include "linear/quant_common.cuh"
#include "linear/quant_mma_geometry.cuh"
#include "linear/quant_mma_fragments.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include "linear/quant_variant.hpp"
#endif

namespace ninfer::cuda_plugin::gemv_quant_mma {

using namespace quant;
using namespace quant_mma;
using gemv_bf16::pack_bf16;

// MMA k slices per step (16 k each): int4 8 (slice 2j + h: word j of a lane's 16 bytes, nibble
// half h), int8 / fp8 4 (slice j: word j).
template <int CODE>
constexpr int kSlices = CODE == kInt4 ? 8 : 4;
// Codes of one lane quarter of a step (16 bytes).
template <int CODE>
constexpr int kQuarterCodes = CODE == kInt4 ? 32 : 16;

// Offset, within a lane quarter's codes, of slice s's first x value. Slice s's B registers are
// b0 = (x[o], x[o + d]) and b1 = (x[o + e], x[o + e + d]), the order in which the A fragment's
// codes decode: int4 a0 / a1 hold nibbles (2h, 2h + 4) of word j and a2 / a3 nibbles (2h + 1,
// 2h + 5), so o = 8j + 2h, d = 4, e = 1; int8 / fp8 a0 / a1 hold bytes (0, 1) and a2 / a3 bytes
// (2, 3), so o = 4j, d = 1, e = 2. Linear in s over the ranges the writers use (x_offset(a + b) =
// x_offset(a) + x_offset(b) for a a multiple of 2 and b < 2, or a a multiple of 4 and b < 4).
template <int CODE>
__host__ __device__ constexpr int x_offset(int s) {
  return CODE == kInt4 ? 8 * (s >> 1) + 2 * (s & 1) : 4 * s;
}

// The A fragment of slice S from the step's 16 code bytes of rows g (c0) and g + 8 (c8), with
// their zero terms (int4: 128 + zero as a bf16 pair; int8: 2^23 + zero as float32 bits).
// S is a constant where the caller's loop is unrolled.
template <int CODE>
__device__ __forceinline__ void a_fragment(int S, const uint4& c0, const uint4& c8, u32 bias0, u32 bias8, u32 (&a)[4]) {
  if constexpr (CODE == kInt4) {
    const int j = S >> 1, h = S & 1;
    const u32 w0 = (&c0.x)[j], w8 = (&c8.x)[j];
    a[0] = int4_pair(w0, 2 * h, bias0), a[1] = int4_pair(w8, 2 * h, bias8);
    a[2] = int4_pair(w0, 2 * h + 1, bias0), a[3] = int4_pair(w8, 2 * h + 1, bias8);
  } else if constexpr (CODE == kInt8) {
    const u32 w0 = (&c0.x)[S], w8 = (&c8.x)[S];
    const float z0 = __uint_as_float(bias0), z8 = __uint_as_float(bias8);
    a[0] = int8_pair(w0, 0, z0), a[1] = int8_pair(w8, 0, z8);
    a[2] = int8_pair(w0, 2, z0), a[3] = int8_pair(w8, 2, z8);
  } else {
    float f0[4], f8[4];
    e4m3x4_to_float((&c0.x)[S], f0);
    e4m3x4_to_float((&c8.x)[S], f8);
    a[0] = pack_bf16(f0[0], f0[1]), a[1] = pack_bf16(f8[0], f8[1]);
    a[2] = pack_bf16(f0[2], f0[3]), a[3] = pack_bf16(f8[2], f8[3]);
  }
}

// The four x values of the slice at x_offset o of a lane quarter (p: the quarter's first value),
// in B-register order (b0's two, then b1's); zeros for a lane without a token.
template <int CODE, bool kVec>
__device__ __forceinline__ void slice_x(const float* p, int o, bool has_token, float (&v)[4]) {
  v[0] = v[1] = v[2] = v[3] = 0.f;
  if (!has_token) return;
  p += o;
  if constexpr (CODE == kInt4) { // x[o], x[o + 4], x[o + 1], x[o + 5]
    if constexpr (kVec) {
      const float2 lo = __ldg(reinterpret_cast<const float2*>(p)), hi = __ldg(reinterpret_cast<const float2*>(p + 4));
      v[0] = lo.x, v[1] = hi.x, v[2] = lo.y, v[3] = hi.y;
    } else {
      v[0] = __ldg(p), v[1] = __ldg(p + 4), v[2] = __ldg(p + 1), v[3] = __ldg(p + 5);
    }
  } else { // x[o .. o + 4)
    if constexpr (kVec) {
      const float4 f = __ldg(reinterpret_cast<const float4*>(p));
      v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
    } else {
      v[0] = __ldg(p), v[1] = __ldg(p + 1), v[2] = __ldg(p + 2), v[3] = __ldg(p + 3);
    }
  }
}

// 16 bytes of codes per lane and row, the step's unit of the reduction.
using Ring = uint4[kStages][kMR][2][32]; // one warp's ring of code steps
using Partial = float[kWarps][kMR][4][32];

// One lane's scale and zero term of row `lane` of its warp's 32 (the lanes that use it read it
// with a shuffle: a row's terms are loaded and converted once per warp, not once per lane
// quarter). bias: int4 128 + zero as a bf16 pair, int8 2^23 + zero as float32 bits. Predicated
// loads and selects rather than branches on the scale dtype, so a step stays one block of code.
template <int CODE>
__device__ __forceinline__ void load_row_terms(const Args& a, long long i, float& sc, u32& bias) {
  const bool f32 = a.scale_dtype == NINFER_DTYPE_F32;
  u32 raw = 0u;
  if (f32) raw = __ldg(static_cast<const u32*>(a.scales) + i);
  else raw = __ldg(static_cast<const unsigned short*>(a.scales) + i);
  const float from16 = a.scale_dtype == NINFER_DTYPE_BF16 ? __uint_as_float(raw << 16)
                                                          : f16_to_float(static_cast<unsigned short>(raw));
  sc = f32 ? __uint_as_float(raw) : from16;
  if constexpr (CODE != kFp8) {
    u32 z = CODE == kInt4 ? 8u : 128u;
    if (a.zeros) z = __ldg(a.zeros + i);
    if constexpr (CODE == kInt4) bias = (0x4300u + z) * 0x10001u;
    else bias = __float_as_uint(kMagic + static_cast<float>(z));
  } else {
    bias = 0u;
  }
}

// The sums of this warp's rows over its stretch of the reduction for the tile of nt tokens at
// t0, left in partial[warp] in the split form's layout ([m][i][lane]: row 16m + g + 8 (i >> 1),
// token 2q + (i & 1)). NT = 1, 2, 4: column pairs, nt <= NT; NT = 8: the split form, any nt.
// kVec: x rows are 16-byte aligned.
template <int CODE, int NT, bool kVec>
__device__ __forceinline__ void tile_sums(const Args& a, long long t0, int nt, long long row0, int s_begin, int s_end,
                                          Ring& ring, Partial& partial) {
  constexpr bool kPairs = NT <= 4;
  constexpr int kSl = kSlices<CODE>;
  constexpr int kStepK = 4 * kQuarterCodes<CODE>;
  // Column pairs: lane L of round r splits slice r * kPer + (L >> 3) / NT of token (L >> 3) % NT
  // and keeps the half of x its own column needs (lo_half: odd column); the lane of column
  // g = 2t + p that multiplies slice s reads it from lane L + 8 NT (s % kPer) of round s / kPer,
  // itself when that is 0 (so with 4 tokens every lane splits for itself). Columns past 2 nt
  // read another lane's values: they feed only their own outputs, which are never stored.
  // Split form: each lane splits its own token's (column g's) slices.
  constexpr int kPer = kPairs ? 4 / NT : 1; // slices per round
  constexpr int kRounds = kSl / kPer;
  constexpr bool kShared = kPer > 1;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, q = lane & 3; // fragment row (and column) / k quarter
  const int wt = kPairs ? (lane >> 3) % NT : g; // the token whose x this lane splits
  const bool lo_half = (lane >> 2) & 1;
  const bool has_token = NT == 1 || wt < nt; // nt >= 1: one token is always there
  const float* xs = a.x + (t0 + (has_token ? wt : 0)) * a.x_stride + q * kQuarterCodes<CODE> +
                    (kShared ? x_offset<CODE>((lane >> 3) / NT) : 0) + static_cast<long long>(s_begin) * kStepK;

  // This lane's code rows (rows g and g + 8 of each tile; rows past N read row N - 1: in
  // bounds, never stored) and the row whose terms it loads (row `lane` of the warp).
  const long long last = a.N - 1;
  const unsigned char* wrow[kMR][2];
#pragma unroll
  for (int m = 0; m < kMR; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      wrow[m][h] = a.w + min(row0 + 16 * m + 8 * h + g, last) * a.row_bytes + 16 * q +
                   static_cast<long long>(s_begin) * kStepBytes;
  const long long term0 = min(row0 + lane, last) * a.groups;
  const int steps_per_group = a.group_size >= a.K ? 0 : a.group_size / kStepK; // 0: one group per row
  // cp.async of the next step to copy (wrow's) into the ring slot at byte offset `slot`, then
  // wrow moves on a step: one commit group per step, empty past the warp's stretch so the group
  // count stays uniform.
  constexpr u32 kSlotBytes = sizeof(ring[0]);
  const u32 ring_lane = static_cast<u32>(__cvta_generic_to_shared(&ring[0][0][0][lane]));
  int to_issue = s_begin;
  auto issue = [&](u32 slot) {
    if (to_issue < s_end)
#pragma unroll
      for (int m = 0; m < kMR; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) cp_async16_stream_shared(ring_lane + slot + (2 * m + h) * 32 * 16, wrow[m][h]);
    cp_async_commit();
#pragma unroll
    for (int m = 0; m < kMR; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) wrow[m][h] += kStepBytes;
    ++to_issue;
  };

#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) issue(i * kSlotBytes);
  // The terms of the step after the current one, a step ahead, so their latency (read once
  // from DRAM, 1/64 of the codes' bytes) hides behind a step's work.
  int group = steps_per_group ? s_begin / steps_per_group : 0; // the group of the next terms loaded
  int in_group = steps_per_group ? s_begin - group * steps_per_group : 0;
  float sc_next = 0.f;
  u32 bias_next = 0u;
  if (s_begin < s_end) load_row_terms<CODE>(a, term0 + group, sc_next, bias_next);

  float total[kMR][kPairs ? 2 : 4];
#pragma unroll
  for (int m = 0; m < kMR; ++m)
#pragma unroll
    for (int i = 0; i < (kPairs ? 2 : 4); ++i) total[m][i] = 0.f;

  u32 slot = 0, free_slot = (kStages - 1) * kSlotBytes; // this step's ring slot; the one step st - 1 used
  for (int st = s_begin; st < s_end; ++st, xs += kStepK) {
    issue(free_slot); // step st + kStages - 1
    const float my_sc = sc_next;
    const u32 my_bias = bias_next;
    if (steps_per_group && ++in_group == steps_per_group) in_group = 0, ++group;
    if (st + 1 < s_end) load_row_terms<CODE>(a, term0 + group, sc_next, bias_next);
    float sc[kMR][2];
    u32 bias[kMR][2];
#pragma unroll
    for (int m = 0; m < kMR; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        sc[m][h] = __shfl_sync(0xffffffffu, my_sc, 16 * m + 8 * h + g);
        bias[m][h] = CODE == kFp8 ? 0u : __shfl_sync(0xffffffffu, my_bias, 16 * m + 8 * h + g);
      }

    // Shared splits of x (1 or 2 tokens) are all made before the codes are read, as the
    // shuffles need every round; otherwise each slice's split is made where it is used.
    u32 r0[kShared ? kRounds : 1], r1[kShared ? kRounds : 1];
    if constexpr (kShared) {
#pragma unroll
      for (int r = 0; r < kRounds; ++r) {
        float v[4];
        slice_x<CODE, kVec>(xs, x_offset<CODE>(r * kPer), has_token, v);
        const XPair p0 = split_x(v[0], v[1]), p1 = split_x(v[2], v[3]);
        r0[r] = lo_half ? p0.lo : p0.hi;
        r1[r] = lo_half ? p1.lo : p1.hi;
      }
    }

    cp_async_wait<kStages - 1>(); // this step's group is complete (each lane reads only its own copies)
    uint4 c[kMR][2];
#pragma unroll
    for (int m = 0; m < kMR; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) c[m][h] = lds16(ring_lane + slot + (2 * m + h) * 32 * 16);
    free_slot = slot;
    slot = slot == (kStages - 1) * kSlotBytes ? 0 : slot + kSlotBytes;

    float acc[kMR][4], acc_lo[kPairs ? 1 : kMR][4];
#pragma unroll
    for (int s = 0; s < kSl; ++s) { // s is a constant once unrolled: registers, no local memory
      u32 x0, x1, x0_lo = 0u, x1_lo = 0u;
      if constexpr (kShared) {
        const int r = s / kPer, shift = 8 * NT * (s % kPer);
        if (shift == 0) x0 = r0[r], x1 = r1[r];
        else x0 = __shfl_sync(0xffffffffu, r0[r], lane + shift), x1 = __shfl_sync(0xffffffffu, r1[r], lane + shift);
      } else {
        float v[4];
        slice_x<CODE, kVec>(xs, x_offset<CODE>(s), has_token, v);
        const XPair p0 = split_x(v[0], v[1]), p1 = split_x(v[2], v[3]);
        if constexpr (kPairs) {
          x0 = lo_half ? p0.lo : p0.hi, x1 = lo_half ? p1.lo : p1.hi;
        } else {
          x0 = p0.hi, x1 = p1.hi, x0_lo = p0.lo, x1_lo = p1.lo;
        }
      }
#pragma unroll
      for (int m = 0; m < kMR; ++m) {
        u32 af[4];
        a_fragment<CODE>(s, c[m][0], c[m][1], bias[m][0], bias[m][1], af);
        if (s == 0) mma_first(acc[m], af, x0, x1);
        else mma(acc[m], af, x0, x1);
        if constexpr (!kPairs) {
          if (s == 0) mma_first(acc_lo[m], af, x0_lo, x1_lo);
          else mma(acc_lo[m], af, x0_lo, x1_lo);
        }
      }
    }

    // The step's sums times its group's scales. Column pairs: acc[m] holds rows g (0, 1) and
    // g + 8 (2, 3) of token q, hi then lo; split form: rows g (0, 1) and g + 8 (2, 3) of tokens
    // 2q and 2q + 1, hi in acc and lo in acc_lo.
#pragma unroll
    for (int m = 0; m < kMR; ++m) {
      if constexpr (kPairs) {
        total[m][0] = fmaf(sc[m][0], acc[m][0] + acc[m][1], total[m][0]);
        total[m][1] = fmaf(sc[m][1], acc[m][2] + acc[m][3], total[m][1]);
      } else {
        total[m][0] = fmaf(sc[m][0], acc[m][0] + acc_lo[m][0], total[m][0]);
        total[m][1] = fmaf(sc[m][0], acc[m][1] + acc_lo[m][1], total[m][1]);
        total[m][2] = fmaf(sc[m][1], acc[m][2] + acc_lo[m][2], total[m][2]);
        total[m][3] = fmaf(sc[m][1], acc[m][3] + acc_lo[m][3], total[m][3]);
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads(); // every warp is done with its ring: it becomes partial[]

#pragma unroll
  for (int m = 0; m < kMR; ++m) {
    if constexpr (kPairs) { // token q, row half hh: the split form's lane 4g + q / 2, slot (q & 1) + 2 hh
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) partial[warp][m][(q & 1) + 2 * hh][4 * g + (q >> 1)] = total[m][hh];
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i) partial[warp][m][i][lane] = total[m][i];
    }
  }
}

template <int CODE, int NT, bool kVec>
__device__ void gemv(const Args& a, long long begin, long long end) {
  // Each warp's ring of kStages steps of codes (16 bytes per lane, row tile and row half); after
  // the reduction loop the same memory holds the warps' sums for the split-K total.
  __shared__ __align__(16) uint4 ring[kWarps][kStages][kMR][2][32];
  static_assert(sizeof(ring) >= sizeof(Partial), "the sums fit in the ring");
  auto& partial = *reinterpret_cast<Partial*>(&ring[0][0][0][0][0]);
  const int N = a.N;
  const int steps = a.row_bytes / kStepBytes;
  const int S = splits(N, steps);
  const int tiles_per_cta = kWarps / S;
  const int warp = threadIdx.x >> 5;
  const int tile = warp / S, split = warp % S;
  const long long cta_row0 = static_cast<long long>(blockIdx.x) * tiles_per_cta * 16 * kMR;
  const int per_split = (steps + S - 1) / S;
  const int s_begin = split * per_split, s_end = min(steps, s_begin + per_split);

  const long long tiles = (end - begin + kTokens - 1) / kTokens;
  for (long long t_tile = blockIdx.y; t_tile < tiles; t_tile += gridDim.y) {
    const long long t0 = begin + t_tile * kTokens;
    const int nt = static_cast<int>(min(static_cast<long long>(kTokens), end - t0));
    tile_sums<CODE, NT, kVec>(a, t0, nt, cta_row0 + tile * 16 * kMR, s_begin, s_end, ring[warp], partial);
    __syncthreads();
    for (int e = threadIdx.x; e < tiles_per_cta * kMR * 4 * 32; e += kThreads) {
      const int ln = e & 31, i = (e >> 5) & 3, m = (e >> 7) % kMR, grp = (e >> 7) / kMR;
      const int token = 2 * (ln & 3) + (i & 1);
      const long long r = cta_row0 + static_cast<long long>(grp) * 16 * kMR + 16 * m + (ln >> 2) + 8 * (i >> 1);
      if (token >= nt || r >= N) continue;
      float v = 0.f;
      for (int s = 0; s < S; ++s) v += partial[grp * S + s][m][i][ln]; // fixed order: deterministic
      float* y = a.y + (t0 + token) * a.y_stride + r; // one thread per element: in place is safe
      *y = a.accumulate ? *y + v : v;
    }
    __syncthreads(); // the ring is reused by the next tile
  }
}

// CTAs per SM each form's registers are capped for: the column-pair forms' step loops stay free of
// spills at 80 registers (ptxas; 349 instead of 343 instructions per int4 step at one token), so
// they run 3 CTAs (24 warps) per SM, 1.5 times the warps to hide the latency that bounds them;
// the split form's would spill at 80 and keeps 2 (128 registers).
__host__ __device__ constexpr int min_ctas_per_sm(int NT) { return NT <= 4 ? 3 : 2; }

// The token form a launch of T tokens takes: column pairs for 1, 2 and up to 4 tokens (one tile),
// the split form beyond (tiles of 8, the last one possibly shorter).
__host__ __device__ constexpr int form_tokens(long long T) { return T <= 1 ? 1 : T == 2 ? 2 : T <= 4 ? 4 : 8; }

} // namespace ninfer::cuda_plugin::gemv_quant_mma

// One kernel per code type, token form (t1, t2, t4: column pairs for up to 1, 2, 4 tokens; t8:
// the split form) and x alignment (_xscalar: rows not 16-byte aligned), each with the registers
// its own loop needs. The launch picks one from w_dtype, the launch's token count and x.
#define NINFER_GEMV_QUANT_MMA(CODE_NAME, CODE, NT, VEC, SUFFIX)                                             \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::gemv_quant_mma::kThreads,               \
                                               ninfer::cuda_plugin::gemv_quant_mma::min_ctas_per_sm(NT))     \
      ninfer_linear_gemv_quant_mma_##CODE_NAME##_t##NT##SUFFIX(ninfer::cuda_plugin::quant::Args a, long long b, \
                                                                long long e) {                               \
    ninfer::cuda_plugin::grid_dependency_prologue();                                                        \
    ninfer::cuda_plugin::gemv_quant_mma::gemv<ninfer::cuda_plugin::quant::CODE, NT, VEC>(a, b, e);          \
  }
#define NINFER_GEMV_QUANT_MMA_FORMS(CODE_NAME, CODE)           \
  NINFER_GEMV_QUANT_MMA(CODE_NAME, CODE, 1, true, )            \
  NINFER_GEMV_QUANT_MMA(CODE_NAME, CODE, 1, false, _xscalar)   \
  NINFER_GEMV_QUANT_MMA(CODE_NAME, CODE, 2, true, )            \
  NINFER_GEMV_QUANT_MMA(CODE_NAME, CODE, 2, false, _xscalar)   \
  NINFER_GEMV_QUANT_MMA(CODE_NAME, CODE, 4, true, )            \
  NINFER_GEMV_QUANT_MMA(CODE_NAME, CODE, 4, false, _xscalar)   \
  NINFER_GEMV_QUANT_MMA(CODE_NAME, CODE, 8, true, )            \
  NINFER_GEMV_QUANT_MMA(CODE_NAME, CODE, 8, false, _xscalar)
NINFER_GEMV_QUANT_MMA_FORMS(int4, kInt4)
NINFER_GEMV_QUANT_MMA_FORMS(int8, kInt8)
NINFER_GEMV_QUANT_MMA_FORMS(fp8, kFp8)

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

struct GemvQuantMmaDef {
  static constexpr const char* name = "gemv_quant_mma";
  static constexpr int threads = gemv_quant_mma::kThreads;
  static constexpr int tokens_per_cta = gemv_quant_mma::kTokens;
  // Code type major, then token form (t1, t2, t4, t8), then x alignment (16-byte aligned first).
  static constexpr int kernel_count = 24;
  static const QuantKernel* kernels() {
#define NINFER_GEMV_QUANT_MMA_KERNEL(NAME) {#NAME, reinterpret_cast<const void*>(NAME)}
#define NINFER_GEMV_QUANT_MMA_KERNELS(C)                                                                     \
  NINFER_GEMV_QUANT_MMA_KERNEL(ninfer_linear_gemv_quant_mma_##C##_t1),                                      \
      NINFER_GEMV_QUANT_MMA_KERNEL(ninfer_linear_gemv_quant_mma_##C##_t1_xscalar),                          \
      NINFER_GEMV_QUANT_MMA_KERNEL(ninfer_linear_gemv_quant_mma_##C##_t2),                                  \
      NINFER_GEMV_QUANT_MMA_KERNEL(ninfer_linear_gemv_quant_mma_##C##_t2_xscalar),                          \
      NINFER_GEMV_QUANT_MMA_KERNEL(ninfer_linear_gemv_quant_mma_##C##_t4),                                  \
      NINFER_GEMV_QUANT_MMA_KERNEL(ninfer_linear_gemv_quant_mma_##C##_t4_xscalar),                          \
      NINFER_GEMV_QUANT_MMA_KERNEL(ninfer_linear_gemv_quant_mma_##C##_t8),                                  \
      NINFER_GEMV_QUANT_MMA_KERNEL(ninfer_linear_gemv_quant_mma_##C##_t8_xscalar)
    static const QuantKernel k[kernel_count] = {NINFER_GEMV_QUANT_MMA_KERNELS(int4), NINFER_GEMV_QUANT_MMA_KERNELS(int8),
                                                NINFER_GEMV_QUANT_MMA_KERNELS(fp8)};
#undef NINFER_GEMV_QUANT_MMA_KERNELS
#undef NINFER_GEMV_QUANT_MMA_KERNEL
    return k;
  }
  // The kernel of a launch: its code type, its token count's form, and whether x rows are
  // 16-byte aligned (float4 loads).
  static int pick(const ninfer_linear_args& a, const ninfer_launch& l) {
    const int nt = gemv_quant_mma::form_tokens(l.token_end - l.token_begin);
    const int form = nt == 1 ? 0 : nt == 2 ? 1 : nt == 4 ? 2 : 3;
    const bool x_vec = a.x_row_stride % 4 == 0 && reinterpret_cast<uintptr_t>(a.x) % 16 == 0;
    return quant::code_index(a.w_dtype) * 8 + form * 2 + (x_vec ? 0 : 1);
  }
  static_assert(gemv_quant_mma::kStepBytes == kWholeStepBytes);
  static int32_t supports(const void*, const ninfer_shape* s) { return whole_step_supports(s); }
  static const char* invalid(const ninfer_linear_args& a) { return whole_step_invalid(a); }
  static dim3 grid(const ninfer_linear_args& a, const ninfer_launch& l) {
    const int row_bytes = a.w_dtype == NINFER_DTYPE_INT4 ? a.in_features / 2 : a.in_features;
    return linear_grid(a.out_features,
                       gemv_quant_mma::rows_per_cta(a.out_features, row_bytes / gemv_quant_mma::kStepBytes),
                       l.grid_x);
  }
};

} // namespace

int32_t register_linear_gemv_quant_mma(const ninfer_registrar* r, char* err, size_t err_len) {
  static ninfer_variant storage;
  return QuantLinearVariant<GemvQuantMmaDef>::add(r, storage, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
