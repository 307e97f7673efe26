// Shared-memory tile pieces of the chunk-parallel gated delta rule
// (gated_deltanet/gated_delta_rule_chunked_parallel.cu): staging 64-row tiles, the two
// register-tiled float32 products it is built from, and the inverse of a 64 x 64 unit
// lower-triangular matrix.
//
// Conventions. A tile is 64 rows (one chunk's tokens) of `pitch` floats; pitches are multiples
// of 4 so rows can be read as float4, and the tile products read whole float4 groups, so
// every column a product reads is staged (zero where there is no data: no NaN from
// uninitialised shared memory can reach a kept result).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ninfer::cuda_plugin::gated_deltanet::parallel {

constexpr int kChunk = 64;
constexpr unsigned kFullWarp = 0xffffffffu;

__host__ __device__ constexpr int round_up(int x, int m) { return (x + m - 1) / m * m; }

// tile[i][d] = src[i * row_stride + d] * (row_scale ? row_scale[i] : 1) for i < n, d < valid;
// 0 for the other rows i < 64 and columns d < fill. All threads of the block take part.
__device__ inline void stage_rows(float* tile, int pitch, const float* src, int64_t row_stride, int n, int valid,
                                  int fill, const float* row_scale = nullptr) {
  for (int idx = threadIdx.x; idx < kChunk * fill; idx += blockDim.x) {
    const int i = idx / fill, d = idx - i * fill;
    float x = 0.f;
    if (i < n && d < valid) {
      x = src[static_cast<int64_t>(i) * row_stride + d];
      if (row_scale) x *= row_scale[i];
    }
    tile[i * pitch + d] = x;
  }
}

__device__ inline float dot4(float4 a, float4 b, float acc) {
  acc = fmaf(a.x, b.x, acc);
  acc = fmaf(a.y, b.y, acc);
  acc = fmaf(a.z, b.z, acc);
  return fmaf(a.w, b.w, acc);
}

__device__ inline float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }

// Gram block of two tiles: acc[a][b] = sum_{d < width} X[r + 16a][d] * Y[c + 16b][d], the
// thread's rows r, r+16, r+32, r+48 and columns c, c+16, c+32, c+48 of the 64 x 64 result
// (r, c in 0..15). width is a multiple of 4. With a pitch of 4 mod 32 the 16 Y rows a warp
// reads fall in distinct banks per quarter warp; the X rows are 2 per warp (broadcast).
__device__ inline void gram_4x4(const float* X, const float* Y, int pitch, int width, int r, int c,
                                float acc[4][4]) {
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int b = 0; b < 4; ++b) acc[a][b] = 0.f;
  for (int d = 0; d < width; d += 4) {
    float4 x[4], y[4];
#pragma unroll
    for (int a = 0; a < 4; ++a) x[a] = load4(X + (r + 16 * a) * pitch + d);
#pragma unroll
    for (int b = 0; b < 4; ++b) y[b] = load4(Y + (c + 16 * b) * pitch + d);
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int b = 0; b < 4; ++b) acc[a][b] = dot4(x[a], y[b], acc[a][b]);
  }
}

// Lower-triangular 64 x 64 matrix times a tile: acc[a][e] = sum_j L[4r + a][j] * B[j][col + e]
// for the thread's rows 4r..4r+3 (r in 0..15) and columns col..col+3 (col a multiple of 4).
// L is zero above its diagonal, so j stops at 4r + 3: contiguous rows halve the work.
__device__ inline void lower_times(const float* L, int lpitch, const float* B, int bpitch, int r, int col,
                                   float acc[4][4]) {
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[a][e] = 0.f;
  const int jend = 4 * r + 4;
  for (int j = 0; j < jend; j += 4) {
    float4 l[4], b[4];
#pragma unroll
    for (int a = 0; a < 4; ++a) l[a] = load4(L + (4 * r + a) * lpitch + j);
#pragma unroll
    for (int k = 0; k < 4; ++k) b[k] = load4(B + (j + k) * bpitch + col);
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      acc[a][0] = dot4(l[a], make_float4(b[0].x, b[1].x, b[2].x, b[3].x), acc[a][0]);
      acc[a][1] = dot4(l[a], make_float4(b[0].y, b[1].y, b[2].y, b[3].y), acc[a][1]);
      acc[a][2] = dot4(l[a], make_float4(b[0].z, b[1].z, b[2].z, b[3].z), acc[a][2]);
      acc[a][3] = dot4(l[a], make_float4(b[0].w, b[1].w, b[2].w, b[3].w), acc[a][3]);
    }
  }
}

// lower_times over a tile `width` columns wide (padded to `padded`, a multiple of 64), written
// to global memory: row i < n of the product goes to row(i), columns < width, stored or, with
// kAccumulate, added to what is there.
template <bool kAccumulate, class Row>
__device__ inline void lower_times_to_rows(const float* L, int lpitch, const float* B, int bpitch, int r, int c,
                                           int n, int padded, int width, Row row) {
  for (int d0 = 0; d0 < padded; d0 += 64) {
    float acc[4][4];
    lower_times(L, lpitch, B, bpitch, r, d0 + 4 * c, acc);
#pragma unroll
    for (int ai = 0; ai < 4; ++ai) {
      const int i = 4 * r + ai;
      if (i >= n) continue;
      float* dst = row(i);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = d0 + 4 * c + e;
        if (col >= width) continue;
        if constexpr (kAccumulate)
          dst[col] += acc[ai][e];
        else
          dst[col] = acc[ai][e];
      }
    }
  }
}

// Pitches of the inverse's matrices: A is walked down its columns (odd pitch, no bank
// conflicts), T is read as float4 rows by lower_times (multiple of 4), P is scratch.
constexpr int kAPitch = kChunk + 1;
constexpr int kTPitch = kChunk + 4;
constexpr int kPPitch = 3 * 16 + 1;
constexpr int kPFloats = 16 * kPPitch;

// T = (I + A)^{-1} for A strictly lower triangular (64 x 64, pitch kAPitch), by blocks of 16:
//   1. the four diagonal blocks T_bb = (I + A_bb)^{-1}, each column by forward substitution
//      (4 lanes per column, 15 steps, only __syncwarp between steps: a column's values are
//      produced and consumed by the same 4 lanes);
//   2. block rows b = 1..3 in order: T_bj = -T_bb (sum_{k<b} A_bk T_kj) for all j < b, as two
//      block-wide products through the scratch P.
// Exact algebra of (I + A) T = I row block by row block; 6 block barriers instead of the 63 a
// row-by-row substitution needs. T must hold the identity on entry (kTPitch, zeros above the
// diagonal stay zero). Needs exactly 256 threads. Ends with a barrier.
__device__ inline void invert_unit_lower(const float* A, float* T, float* P) {
  const int tid = threadIdx.x;
  {
    const int b = tid >> 6, c = (tid >> 2) & 15, p = tid & 3;
    const int base = 16 * b, gc = base + c;
    for (int i = 1; i < 16; ++i) {
      float s = 0.f;
      if (c < i)
        for (int j = c + p; j < i; j += 4) s = fmaf(A[(base + i) * kAPitch + base + j], T[(base + j) * kTPitch + gc], s);
      s += __shfl_xor_sync(kFullWarp, s, 1);
      s += __shfl_xor_sync(kFullWarp, s, 2);
      if (p == 0 && c < i) T[(base + i) * kTPitch + gc] = -s;
      __syncwarp();
    }
  }
  __syncthreads();
  for (int bi = 1; bi < 4; ++bi) {
    const int cols = 16 * bi; // the block row's rows are cols..cols+15; its unknown columns 0..cols-1
    for (int idx = tid; idx < 16 * cols; idx += blockDim.x) {
      const int r = idx / cols, c = idx - r * cols;
      float s = 0.f;
      for (int k = c; k < cols; ++k) s = fmaf(A[(cols + r) * kAPitch + k], T[k * kTPitch + c], s);
      P[r * kPPitch + c] = s;
    }
    __syncthreads();
    for (int idx = tid; idx < 16 * cols; idx += blockDim.x) {
      const int r = idx / cols, c = idx - r * cols;
      float s = 0.f;
      for (int m = 0; m <= r; ++m) s = fmaf(T[(cols + r) * kTPitch + cols + m], P[m * kPPitch + c], s);
      T[(cols + r) * kTPitch + c] = -s;
    }
    __syncthreads();
  }
}

} // namespace ninfer::cuda_plugin::gated_deltanet::parallel
