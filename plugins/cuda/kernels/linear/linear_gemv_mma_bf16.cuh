// linear, decode-sized, bfloat16 weights: the GEMV kernel behind gemv_mma_t{1,2,4,8} when W is bf16
// and its rows are 16-byte vectors (in_features % 8 == 0). Included by linear/linear_gemv_mma.cu
// and linear/linear_gemv_quant_mma.cu (its helpers: the load, the MMA, the bf16 packing).
//
// Decode reads every weight byte once per step, so the kernel is built around streaming W at
// the memory's rate, with the arithmetic on the tensor cores so it never competes with that:
//   - a warp owns 16 * MR consecutive weight rows and one stretch of the reduction; each lane
//     loads 16 bytes (8 bf16) of two rows per 32-wide k step, MR * 2 * U such loads in flight
//     before the first use (ld.global.nc, no L1 allocation: W is read exactly once; a 256-byte
//     L2 prefetch hint, which measured 2-9% faster than without);
//   - those 16 bytes are used as they are as the A fragment of mma.m16n8k16 (bf16 in, f32
//     accumulate): a dot product may take its k terms in any order, so lane q's k range
//     [8q, 8q+8) of the step is mapped onto the fragment's k slots, and x (the B fragment, the
//     tile's up to 8 tokens as the MMA's n) is read with the same mapping;
//   - x stays float32 to the last bit that matters: each x value is split into bf16 hi + lo
//     (x = hi + lo + O(2^-17 |x|)) and both halves are multiplied, so the result is as close to
//     a float32 GEMV as the float32 test tolerance needs; x is read straight from global memory
//     (L1/L2 resident: a few KiB per token), never staged, so no barrier precedes the W stream;
//   - the CTA's 8 warps split the reduction S ways (S from the shape alone: enough warps for
//     the memory system on small out_features, 1 for the lm_head); their partial sums meet in
//     shared memory and are added in a fixed order, so results are deterministic; the thread
//     that adds them stores the element (adding y's previous value when a.accumulate is set).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "ninfer/abi/ops/linear.h"

namespace ninfer::cuda_plugin {
namespace gemv_bf16 {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kStepK = 32;       // k per warp step: 4 lanes x 8 bf16
constexpr int kTargetWarps = 4096; // warps in flight the split aims for (a property of the shape)

// Warps along the reduction per group of 16 * MR rows: powers of two up to the CTA's 8 warps,
// while the whole launch has fewer than kTargetWarps warps per token tile and every warp keeps
// at least 8 steps of k.
__host__ __device__ constexpr int splits(int out_features, int in_features, int mr) {
  const int64_t groups = (static_cast<int64_t>(out_features) + 16 * mr - 1) / (16 * mr);
  const int steps = (in_features + kStepK - 1) / kStepK;
  int s = 1;
  while (s < kWarps && groups * s < kTargetWarps && steps / (2 * s) >= 8) s *= 2;
  return s;
}

// Output rows one CTA covers.
__host__ __device__ constexpr int rows_per_cta(int out_features, int in_features, int mr) {
  return kWarps / splits(out_features, in_features, mr) * 16 * mr;
}

// 16 bytes of W, read once: no L1 allocation, so x keeps the L1. A lane's U loads of a row
// are consecutive 64-byte pieces; the 256-byte L2 prefetch hint turns them into whole DRAM
// bursts instead of separate 64-byte sector requests.
__device__ __forceinline__ uint4 load_stream(const uint4* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

__device__ __forceinline__ uint32_t pack_bf16(float lo_k, float hi_k) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo_k, hi_k); // .x = lo_k (lower 16 bits)
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ __forceinline__ float bf16_lo(uint32_t v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t v) { return __uint_as_float(v & 0xffff0000u); }

// d += A(16x16, row) . B(16x8, col), bf16 inputs, f32 accumulators.
__device__ __forceinline__ void mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// x[k .. k+8) of one token row as 8 floats: 16-byte loads when the row allows, else scalars.
__device__ __forceinline__ void load_x8(const float* row, int k, bool vec, float (&f)[8]) {
  if (vec) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(row + k));
    const float4 b = __ldg(reinterpret_cast<const float4*>(row + k + 4));
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) f[i] = __ldg(row + k + i);
  }
}

// TPC tokens per tile (1..8, the MMA's n slots beyond it stay zero), MR row tiles of 16 per
// warp, U k steps in flight per lane. Requires in_features % 8 == 0 and W 16-byte aligned
// (the launch checks both).
template <int TPC, int MR, int U>
__device__ void gemv(const ninfer_linear_args& a, int64_t begin, int64_t end) {
  static_assert(TPC >= 1 && TPC <= 8, "the MMA has 8 token slots");
  __shared__ float partial[kWarps][MR][4][32]; // each warp's accumulators, for the split-K sum
  const int K = a.in_features, N = a.out_features;
  const int S = splits(N, K, MR);
  const int groups = kWarps / S;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, q = lane & 3; // fragment row (and token) / k quarter
  const int group = warp / S, split = warp % S;
  const int64_t cta_row0 = static_cast<int64_t>(blockIdx.x) * groups * 16 * MR;
  const int64_t row0 = cta_row0 + static_cast<int64_t>(group) * 16 * MR;

  const uint4* wrow[MR][2];
#pragma unroll
  for (int m = 0; m < MR; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) { // rows past N read row N-1 (in bounds; never stored)
      const int64_t r = min(row0 + 16 * m + 8 * h + g, static_cast<int64_t>(N) - 1);
      wrow[m][h] = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(a.w) + r * K);
    }
  const int chunks = K / 8; // 16-byte chunks per W row
  const int steps = (K + kStepK - 1) / kStepK;
  const int per_split = (steps + S - 1) / S;
  const int s_begin = split * per_split, s_end = min(steps, s_begin + per_split);
  const bool x_vec = a.x_row_stride % 4 == 0 && reinterpret_cast<uintptr_t>(a.x) % 16 == 0;

  const int64_t tiles = (end - begin + TPC - 1) / TPC;
  for (int64_t tile = blockIdx.y; tile < tiles; tile += gridDim.y) {
    const int64_t t0 = begin + tile * TPC;
    const int nt = static_cast<int>(min(static_cast<int64_t>(TPC), end - t0));
    const bool has_token = g < nt; // this lane's B column is token t0 + g
    const float* xrow = a.x + (t0 + (has_token ? g : 0)) * a.x_row_stride;
    float acc[MR][4];
#pragma unroll
    for (int m = 0; m < MR; ++m) acc[m][0] = acc[m][1] = acc[m][2] = acc[m][3] = 0.f;

    for (int st = s_begin; st < s_end; st += U) {
      uint4 wv[U][MR][2];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c = (st + u) * 4 + q;
        const bool ok = st + u < s_end && c < chunks;
#pragma unroll
        for (int m = 0; m < MR; ++m)
#pragma unroll
          for (int h = 0; h < 2; ++h) wv[u][m][h] = ok ? load_stream(wrow[m][h] + c) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c = (st + u) * 4 + q;
        float xf[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        if (has_token && st + u < s_end && c < chunks) load_x8(xrow, c * 8, x_vec, xf);
        uint32_t hi[4], lo[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          hi[i] = pack_bf16(xf[2 * i], xf[2 * i + 1]);
          lo[i] = pack_bf16(xf[2 * i] - bf16_lo(hi[i]), xf[2 * i + 1] - bf16_hi(hi[i]));
        }
        // MMA j takes k [8q + 4j, 8q + 4j + 4) of this step: W words j*2, j*2+1 of each row.
#pragma unroll
        for (int m = 0; m < MR; ++m) {
          const uint4& r0 = wv[u][m][0];
          const uint4& r8 = wv[u][m][1];
          mma(acc[m], r0.x, r8.x, r0.y, r8.y, hi[0], hi[1]);
          mma(acc[m], r0.x, r8.x, r0.y, r8.y, lo[0], lo[1]);
          mma(acc[m], r0.z, r8.z, r0.w, r8.w, hi[2], hi[3]);
          mma(acc[m], r0.z, r8.z, r0.w, r8.w, lo[2], lo[3]);
        }
      }
    }

    // acc[m][i] is row 16m + g + 8 (i >> 1), token 2q + (i & 1) of this warp's rows.
#pragma unroll
    for (int m = 0; m < MR; ++m)
#pragma unroll
      for (int i = 0; i < 4; ++i) partial[warp][m][i][lane] = acc[m][i];
    __syncthreads();
    for (int e = threadIdx.x; e < groups * MR * 4 * 32; e += kThreads) {
      const int ln = e & 31, i = (e >> 5) & 3, m = (e >> 7) % MR, grp = (e >> 7) / MR;
      const int token = 2 * (ln & 3) + (i & 1);
      const int64_t row = cta_row0 + static_cast<int64_t>(grp) * 16 * MR + 16 * m + (ln >> 2) + 8 * (i >> 1);
      if (token >= nt || row >= N) continue;
      float v = 0.f;
      for (int s = 0; s < S; ++s) v += partial[grp * S + s][m][i][ln]; // fixed order: deterministic
      float* y = a.y + (t0 + token) * a.y_row_stride + row; // one thread per element: in place is safe
      *y = a.accumulate ? *y + v : v;
    }
    __syncthreads(); // partial[] is reused by the next tile
  }
}

} // namespace gemv_bf16
} // namespace ninfer::cuda_plugin
