// linear on quantized weights (INT4, INT8, FP8_E4M3 in the canonical layout of
// ninfer/abi/ops/quant_weight.h), decode-sized, on the tensor cores: gemv_quant_mma_split, up to 8
// tokens per tile, every code byte read once per tile. The schedule tables give it calls of 4-8
// tokens: there its 8-column MMAs (x split into hi and lo MMAs, 2 CTAs per SM at up to 128
// registers) run the int4 Qwen3.5-27B shape at batch 8 at 429 tok/s on an H200 against 302 for
// gemv_quant_mma's split form (ninfer-bench, docs/quantization.md); gemv_quant_mma's column pairs
// win at 1-3 tokens. The bf16 GEMV's design
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
//     slots in the order they decode, and x (the B fragment, the tile's tokens as the MMA's n)
//     is read in the same order, split into bf16 hi + lo so x keeps float32 accuracy;
//   - the CTA's 8 warps split the reduction S ways (from the shape alone) and meet in shared
//     memory in a fixed order (deterministic), as the bf16 kernel does.
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

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include "linear/quant_variant.hpp"
#endif

namespace ninfer::cuda_plugin::gemv_quant_mma_split {

using namespace quant;
using namespace quant_mma;
using gemv_bf16::mma;
using gemv_bf16::pack_bf16;

__device__ __forceinline__ u32 bf16x2_sub(u32 a, u32 b) {
  const __nv_bfloat162 d = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&a), *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<const u32*>(&d);
}

// Nibbles i and i + 4 of w as the bf16 pair (u_i - zero, u_{i+4} - zero); bias = 128 + zero in
// both halves. 0x4300 is bf16 128.0, whose last mantissa bit weighs 1: OR-ing a nibble in adds it.
__device__ __forceinline__ u32 int4_pair(u32 w, int i, u32 bias) {
  return bf16x2_sub(((w >> (4 * i)) & 0x000F000Fu) | 0x43004300u, bias);
}

// The zero point's term of row n, group g: 128 + zero as a bf16 pair (int4), 2^23 + zero (int8).
__device__ __forceinline__ u32 int4_bias(const Args& a, long long i) {
  const u32 z = a.zeros ? __ldg(a.zeros + i) : 8u;
  return (0x4300u + z) * 0x10001u;
}
__device__ __forceinline__ float int8_bias(const Args& a, long long i) {
  return kMagic + static_cast<float>(a.zeros ? __ldg(a.zeros + i) : 128u);
}

// N floats of the token row at k (zeros for a lane without a token): float4 loads when aligned.
template <int N>
__device__ __forceinline__ void load_x(const float* row, int k, bool has_token, bool vec, float (&f)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) f[i] = 0.f;
  if (!has_token) return;
  if (vec) {
#pragma unroll
    for (int i = 0; i < N / 4; ++i) {
      const float4 v = __ldg(reinterpret_cast<const float4*>(row + k) + i);
      f[4 * i] = v.x, f[4 * i + 1] = v.y, f[4 * i + 2] = v.z, f[4 * i + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) f[i] = __ldg(row + k + i);
  }
}

// acc[m] += this step's (code - zero) . x_hi of tile m and acc_lo[m] += ... . x_lo, for the 16
// bytes of rows g (codes[m][0]) and g + 8 (codes[m][1]): two accumulators, so two independent
// MMA chains per tile hide the MMA latency.
template <int CODE>
__device__ __forceinline__ void step_mmas(const Args& a, const uint4 (&codes)[kMR][2], const long long (&gi)[kMR][2],
                                          const float* xrow, int k0, bool has_token, bool x_vec,
                                          float (&acc)[kMR][4], float (&acc_lo)[kMR][4]) {
  if constexpr (CODE == kInt4) {
    u32 bias[kMR][2];
#pragma unroll
    for (int m = 0; m < kMR; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) bias[m][h] = int4_bias(a, gi[m][h]);
#pragma unroll
    for (int j = 0; j < 4; ++j) { // word j: codes k0 + 8j .. k0 + 8j + 7
      float xf[8];
      load_x<8>(xrow, k0 + 8 * j, has_token, x_vec, xf);
#pragma unroll
      for (int h = 0; h < 2; ++h) { // slots (2q, 2q+1) <- k (2h, 2h+4), (2q+8, 2q+9) <- k (2h+1, 2h+5)
        const XPair b0 = split_x(xf[2 * h], xf[2 * h + 4]);
        const XPair b1 = split_x(xf[2 * h + 1], xf[2 * h + 5]);
#pragma unroll
        for (int m = 0; m < kMR; ++m) {
          const u32 w0 = (&codes[m][0].x)[j], w8 = (&codes[m][1].x)[j];
          const u32 a0 = int4_pair(w0, 2 * h, bias[m][0]), a2 = int4_pair(w0, 2 * h + 1, bias[m][0]);
          const u32 a1 = int4_pair(w8, 2 * h, bias[m][1]), a3 = int4_pair(w8, 2 * h + 1, bias[m][1]);
          mma(acc[m], a0, a1, a2, a3, b0.hi, b1.hi);
          mma(acc_lo[m], a0, a1, a2, a3, b0.lo, b1.lo);
        }
      }
    }
  } else {
    float bias[kMR][2];
    if constexpr (CODE == kInt8) {
#pragma unroll
      for (int m = 0; m < kMR; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) bias[m][h] = int8_bias(a, gi[m][h]);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) { // word j: codes k0 + 4j .. k0 + 4j + 3; slots in k order
      float xf[4];
      load_x<4>(xrow, k0 + 4 * j, has_token, x_vec, xf);
      const XPair b0 = split_x(xf[0], xf[1]);
      const XPair b1 = split_x(xf[2], xf[3]);
#pragma unroll
      for (int m = 0; m < kMR; ++m) {
        const u32 w0 = (&codes[m][0].x)[j], w8 = (&codes[m][1].x)[j];
        u32 a0, a1, a2, a3;
        if constexpr (CODE == kInt8) {
          a0 = int8_pair(w0, 0, bias[m][0]), a2 = int8_pair(w0, 2, bias[m][0]);
          a1 = int8_pair(w8, 0, bias[m][1]), a3 = int8_pair(w8, 2, bias[m][1]);
        } else {
          float f0[4], f8[4];
          e4m3x4_to_float(w0, f0);
          e4m3x4_to_float(w8, f8);
          a0 = pack_bf16(f0[0], f0[1]), a2 = pack_bf16(f0[2], f0[3]);
          a1 = pack_bf16(f8[0], f8[1]), a3 = pack_bf16(f8[2], f8[3]);
        }
        mma(acc[m], a0, a1, a2, a3, b0.hi, b1.hi);
        mma(acc_lo[m], a0, a1, a2, a3, b0.lo, b1.lo);
      }
    }
  }
}

template <int CODE>
__device__ void gemv(const Args& a, long long begin, long long end) {
  // Each warp's ring of kStages steps of codes (16 bytes per lane, row tile and row half); after
  // the reduction loop the same memory holds the warps' sums for the split-K total.
  __shared__ __align__(16) uint4 ring[kWarps][kStages][kMR][2][32];
  static_assert(sizeof(ring) >= sizeof(float) * kWarps * kMR * 4 * 32, "the sums fit in the ring");
  auto& partial = *reinterpret_cast<float (*)[kWarps][kMR][4][32]>(&ring[0][0][0][0][0]);
  constexpr int kCodes16 = CODE == kInt4 ? 32 : 16; // codes per 16 bytes
  const int N = a.N;
  const int steps = a.row_bytes / kStepBytes;
  const int S = splits(N, steps);
  const int tiles_per_cta = kWarps / S;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, q = lane & 3; // fragment row (and token) / k quarter
  const int tile = warp / S, split = warp % S;
  const long long cta_row0 = static_cast<long long>(blockIdx.x) * tiles_per_cta * 16 * kMR;
  const long long row0 = cta_row0 + static_cast<long long>(tile) * 16 * kMR;

  const uint4* wrow[kMR][2];
  int row[kMR][2]; // N < 2^31
#pragma unroll
  for (int m = 0; m < kMR; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) { // rows past N read row N-1 (in bounds; never stored)
      row[m][h] = static_cast<int>(min(row0 + 16 * m + 8 * h + g, static_cast<long long>(N) - 1));
      wrow[m][h] = reinterpret_cast<const uint4*>(a.w + static_cast<long long>(row[m][h]) * a.row_bytes);
    }
  const int per_split = (steps + S - 1) / S;
  const int s_begin = split * per_split, s_end = min(steps, s_begin + per_split);
  const bool x_vec = a.x_stride % 4 == 0 && reinterpret_cast<unsigned long long>(a.x) % 16 == 0;
  const int step_k = 4 * kCodes16;
  const bool one_group = a.group_size >= a.K;
  // Copies step st's 16-byte pieces of this lane into ring slot st % kStages (one commit group
  // per step, empty past the warp's stretch so the group count stays uniform).
  auto issue = [&](int st) {
    if (st < s_end)
#pragma unroll
      for (int m = 0; m < kMR; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) cp_async16_stream(&ring[warp][st % kStages][m][h][lane], wrow[m][h] + st * 4 + q);
    cp_async_commit();
  };

  // The scales of step st's rows: loaded a step ahead, so their latency (they are read once
  // from DRAM, 1/64 of the codes' bytes) hides behind a step's work instead of stalling it.
  auto scales_of = [&](int st, float (&sc)[kMR][2]) {
    const int group = one_group ? 0 : st * step_k / a.group_size;
#pragma unroll
    for (int m = 0; m < kMR; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) sc[m][h] = load_scale(a, static_cast<long long>(row[m][h]) * a.groups + group);
  };

  const long long tiles = (end - begin + kTokens - 1) / kTokens;
  for (long long t_tile = blockIdx.y; t_tile < tiles; t_tile += gridDim.y) {
    const long long t0 = begin + t_tile * kTokens;
    const int nt = static_cast<int>(min(static_cast<long long>(kTokens), end - t0));
    const bool has_token = g < nt; // this lane's B column is token t0 + g
    const float* xrow = a.x + (t0 + (has_token ? g : 0)) * a.x_stride;
    float total[kMR][4];
#pragma unroll
    for (int m = 0; m < kMR; ++m) total[m][0] = total[m][1] = total[m][2] = total[m][3] = 0.f;

#pragma unroll
    for (int i = 0; i < kStages - 1; ++i) issue(s_begin + i);
    float sc_next[kMR][2] = {};
    if (s_begin < s_end) scales_of(s_begin, sc_next);
    for (int st = s_begin; st < s_end; ++st) {
      issue(st + kStages - 1); // into the slot step st - 1 used
      float sc[kMR][2];
#pragma unroll
      for (int m = 0; m < kMR; ++m) sc[m][0] = sc_next[m][0], sc[m][1] = sc_next[m][1];
      if (st + 1 < s_end) scales_of(st + 1, sc_next);
      cp_async_wait<kStages - 1>(); // step st's group is complete
      uint4 codes[kMR][2];
#pragma unroll
      for (int m = 0; m < kMR; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) codes[m][h] = ring[warp][st % kStages][m][h][lane];
      const int group = one_group ? 0 : st * step_k / a.group_size;
      long long gi[kMR][2];
#pragma unroll
      for (int m = 0; m < kMR; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) gi[m][h] = static_cast<long long>(row[m][h]) * a.groups + group;
      float acc[kMR][4], acc_lo[kMR][4];
#pragma unroll
      for (int m = 0; m < kMR; ++m)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[m][i] = acc_lo[m][i] = 0.f;
      step_mmas<CODE>(a, codes, gi, xrow, st * step_k + q * kCodes16, has_token, x_vec, acc, acc_lo);
      // acc[m][i]: row 16m + g + 8 (i >> 1), token 2q + (i & 1): the step's sum, times its scale.
#pragma unroll
      for (int m = 0; m < kMR; ++m) {
        const float s0 = sc[m][0], s8 = sc[m][1];
        total[m][0] = fmaf(s0, acc[m][0] + acc_lo[m][0], total[m][0]);
        total[m][1] = fmaf(s0, acc[m][1] + acc_lo[m][1], total[m][1]);
        total[m][2] = fmaf(s8, acc[m][2] + acc_lo[m][2], total[m][2]);
        total[m][3] = fmaf(s8, acc[m][3] + acc_lo[m][3], total[m][3]);
      }
    }
    cp_async_wait<0>();
    __syncthreads(); // every warp is done with its ring: it becomes partial[]

#pragma unroll
    for (int m = 0; m < kMR; ++m)
#pragma unroll
      for (int i = 0; i < 4; ++i) partial[warp][m][i][lane] = total[m][i];
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

} // namespace ninfer::cuda_plugin::gemv_quant_mma_split

#define NINFER_GEMV_QUANT_MMA_SPLIT(CODE_NAME, CODE)                                                               \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::gemv_quant_mma_split::kThreads, 2)             \
      ninfer_linear_gemv_quant_mma_split_##CODE_NAME(ninfer::cuda_plugin::quant::Args a, long long b, long long e) { \
    ninfer::cuda_plugin::grid_dependency_prologue();                                                         \
    ninfer::cuda_plugin::gemv_quant_mma_split::gemv<ninfer::cuda_plugin::quant::CODE>(a, b, e);                    \
  }
NINFER_GEMV_QUANT_MMA_SPLIT(int4, kInt4)
NINFER_GEMV_QUANT_MMA_SPLIT(int8, kInt8)
NINFER_GEMV_QUANT_MMA_SPLIT(fp8, kFp8)

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

struct GemvQuantMmaSplitDef {
  static constexpr const char* name = "gemv_quant_mma_split";
  static constexpr int threads = gemv_quant_mma_split::kThreads;
  static constexpr int tokens_per_cta = gemv_quant_mma_split::kTokens;
  static const QuantKernel* kernels() {
    static const QuantKernel k[3] = {
        {"ninfer_linear_gemv_quant_mma_split_int4", reinterpret_cast<const void*>(ninfer_linear_gemv_quant_mma_split_int4)},
        {"ninfer_linear_gemv_quant_mma_split_int8", reinterpret_cast<const void*>(ninfer_linear_gemv_quant_mma_split_int8)},
        {"ninfer_linear_gemv_quant_mma_split_fp8", reinterpret_cast<const void*>(ninfer_linear_gemv_quant_mma_split_fp8)}};
    return k;
  }
  static_assert(gemv_quant_mma_split::kStepBytes == kWholeStepBytes);
  static int32_t supports(const void*, const ninfer_shape* s) { return whole_step_supports(s); }
  static const char* invalid(const ninfer_linear_args& a) { return whole_step_invalid(a); }
  static dim3 grid(const ninfer_linear_args& a, const ninfer_launch& l) {
    const int row_bytes = a.w_dtype == NINFER_DTYPE_INT4 ? a.in_features / 2 : a.in_features;
    return linear_grid(a.out_features,
                       gemv_quant_mma_split::rows_per_cta(a.out_features, row_bytes / gemv_quant_mma_split::kStepBytes),
                       l.grid_x);
  }
};

} // namespace

int32_t register_linear_gemv_quant_mma_split(const ninfer_registrar* r, char* err, size_t err_len) {
  static ninfer_variant storage;
  return QuantLinearVariant<GemvQuantMmaSplitDef>::add(r, storage, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
