#include "dense_f64.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "ninfer/support/row_threads.hpp"

namespace ninfer::quantize_detail {

namespace {

// Register tile of gemm_acc: 4 rows of C by 8 columns, 32 accumulators (16 SSE2 registers).
constexpr int64_t kTileRows = 4, kTileCols = 8;
// Cache tile: columns of B (and C) kept hot while every row block of C passes over them.
constexpr int64_t kCacheCols = 256;

template <bool Subtract>
void tile_4x8(double* c, int64_t ldc, const double* a, int64_t lda, const double* b, int64_t ldb, int64_t depth) {
  double acc[kTileRows][kTileCols];
  for (int64_t i = 0; i < kTileRows; ++i)
    for (int64_t j = 0; j < kTileCols; ++j) acc[i][j] = c[i * ldc + j];
  for (int64_t t = 0; t < depth; ++t) {
    const double* at = a + t * lda;
    const double* bt = b + t * ldb;
    for (int64_t i = 0; i < kTileRows; ++i)
      for (int64_t j = 0; j < kTileCols; ++j) {
        if constexpr (Subtract) acc[i][j] -= at[i] * bt[j];
        else acc[i][j] += at[i] * bt[j];
      }
  }
  for (int64_t i = 0; i < kTileRows; ++i)
    for (int64_t j = 0; j < kTileCols; ++j) c[i * ldc + j] = acc[i][j];
}

// The edges: any m x n, one element at a time (the same order of terms as the tiles).
template <bool Subtract>
void tile_edge(double* c, int64_t ldc, const double* a, int64_t lda, const double* b, int64_t ldb, int64_t m,
               int64_t n, int64_t depth) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = c[i * ldc + j];
      for (int64_t t = 0; t < depth; ++t) {
        if constexpr (Subtract) s -= a[t * lda + i] * b[t * ldb + j];
        else s += a[t * lda + i] * b[t * ldb + j];
      }
      c[i * ldc + j] = s;
    }
}

template <bool Subtract>
void gemm_portable(double* c, int64_t ldc, const double* a, int64_t lda, const double* b, int64_t ldb, int64_t m,
                   int64_t n, int64_t depth) {
  for (int64_t j0 = 0; j0 < n; j0 += kCacheCols) {
    const int64_t nj = std::min(kCacheCols, n - j0);
    const int64_t full_j = nj / kTileCols * kTileCols;
    int64_t i = 0;
    for (; i + kTileRows <= m; i += kTileRows) {
      for (int64_t j = 0; j < full_j; j += kTileCols)
        tile_4x8<Subtract>(c + i * ldc + j0 + j, ldc, a + i, lda, b + j0 + j, ldb, depth);
      if (full_j < nj)
        tile_edge<Subtract>(c + i * ldc + j0 + full_j, ldc, a + i, lda, b + j0 + full_j, ldb, kTileRows, nj - full_j,
                            depth);
    }
    if (i < m) tile_edge<Subtract>(c + i * ldc + j0, ldc, a + i, lda, b + j0, ldb, m - i, nj, depth);
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
// The same products and sums, 6 rows by 8 columns in AVX2 registers: about twice the portable
// tile's rate. Multiplies and adds stay separate (no FMA), so every element gets the same bits as
// from the portable tiles, on any machine.
#define NINFER_DENSE_AVX2 1
typedef double v4d __attribute__((vector_size(32)));
constexpr int64_t kAvxRows = 6;

template <bool Subtract>
__attribute__((target("avx2"))) void gemm_avx2(double* c, int64_t ldc, const double* a, int64_t lda, const double* b,
                                               int64_t ldb, int64_t m, int64_t n, int64_t depth) {
  for (int64_t j0 = 0; j0 < n; j0 += kCacheCols) {
    const int64_t nj = std::min(kCacheCols, n - j0);
    const int64_t full_j = nj / 8 * 8;
    int64_t i = 0;
    for (; i + kAvxRows <= m; i += kAvxRows) {
      for (int64_t j = 0; j < full_j; j += 8) {
        double* cc = c + i * ldc + j0 + j;
        v4d acc[kAvxRows][2];
        for (int64_t r = 0; r < kAvxRows; ++r) {
          std::memcpy(&acc[r][0], cc + r * ldc, 32);
          std::memcpy(&acc[r][1], cc + r * ldc + 4, 32);
        }
        for (int64_t t = 0; t < depth; ++t) {
          const double* at = a + t * lda + i;
          const double* bt = b + t * ldb + j0 + j;
          v4d b0, b1;
          std::memcpy(&b0, bt, 32);
          std::memcpy(&b1, bt + 4, 32);
          for (int64_t r = 0; r < kAvxRows; ++r) {
            const v4d av = {at[r], at[r], at[r], at[r]};
            if constexpr (Subtract) {
              acc[r][0] -= av * b0;
              acc[r][1] -= av * b1;
            } else {
              acc[r][0] += av * b0;
              acc[r][1] += av * b1;
            }
          }
        }
        for (int64_t r = 0; r < kAvxRows; ++r) {
          std::memcpy(cc + r * ldc, &acc[r][0], 32);
          std::memcpy(cc + r * ldc + 4, &acc[r][1], 32);
        }
      }
      if (full_j < nj)
        tile_edge<Subtract>(c + i * ldc + j0 + full_j, ldc, a + i, lda, b + j0 + full_j, ldb, kAvxRows, nj - full_j,
                            depth);
    }
    if (i < m) tile_edge<Subtract>(c + i * ldc + j0, ldc, a + i, lda, b + j0, ldb, m - i, nj, depth);
  }
}

bool have_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
#endif

template <bool Subtract>
void gemm(double* c, int64_t ldc, const double* a, int64_t lda, const double* b, int64_t ldb, int64_t m, int64_t n,
          int64_t depth) {
#ifdef NINFER_DENSE_AVX2
  if (have_avx2()) return gemm_avx2<Subtract>(c, ldc, a, lda, b, ldb, m, n, depth);
#endif
  gemm_portable<Subtract>(c, ldc, a, lda, b, ldb, m, n, depth);
}

// Runs body(item) for items [0, count) on the host's cores, items taken in order by whichever
// thread is free (the triangular loops below give items of very different sizes).
template <class Body>
void for_items(int64_t count, double cost_per_item, Body body) {
  const int64_t threads = threads_for(count, cost_per_item);
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t i = next++; i < count; i = next++) body(i);
  };
  if (threads <= 1) return work();
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t) pool.emplace_back(work);
  for (auto& th : pool) th.join();
}

} // namespace

void gemm_acc(double* c, int64_t ldc, const double* a, int64_t lda, const double* b, int64_t ldb, int64_t m, int64_t n,
              int64_t depth, bool subtract) {
  if (subtract) gemm<true>(c, ldc, a, lda, b, ldb, m, n, depth);
  else gemm<false>(c, ldc, a, lda, b, ldb, m, n, depth);
}

void gram_accumulate(double* h, int64_t k, const float* x, int64_t rows, int64_t stride) {
  // Rows widened to float64 a chunk at a time; tile (i, j) of the upper triangle sums the chunk's
  // rows in order, so chunks add in row order too.
  constexpr int64_t kChunk = 256;
  constexpr int64_t kBlock = 64; // rows of H per work item
  std::vector<double> xd(static_cast<size_t>(std::min(rows, kChunk) * k));
  const int64_t blocks = (k + kBlock - 1) / kBlock;
  for (int64_t r0 = 0; r0 < rows; r0 += kChunk) {
    const int64_t n = std::min(kChunk, rows - r0);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t i = 0; i < k; ++i) xd[static_cast<size_t>(t * k + i)] = x[(r0 + t) * stride + i];
    for_items(blocks, static_cast<double>(n * k * kBlock), [&](int64_t b) {
      const int64_t i0 = b * kBlock, m = std::min(kBlock, k - i0);
      // Columns from the block's first row on: the diagonal tile's lower part is written too and
      // ignored (symmetrize_from_upper overwrites it).
      gemm<false>(h + i0 * k + i0, k, xd.data() + i0, k, xd.data() + i0, k, m, k - i0, n);
    });
  }
}

void symmetrize_from_upper(double* a, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) a[j * n + i] = a[i * n + j];
}

int64_t cholesky_upper(double* a, int64_t n) {
  // Right-looking, by panels of kPanel rows: factor the panel's diagonal block, then its rows to
  // the right (R12 = R11⁻ᵀ A12), then A22 −= R12ᵀ R12 on the upper triangle.
  constexpr int64_t kPanel = 64;
  for (int64_t k0 = 0; k0 < n; k0 += kPanel) {
    const int64_t kb = std::min(kPanel, n - k0), right = k0 + kb;
    for (int64_t k = k0; k < right; ++k) {
      double* rk = a + k * n;
      double d = rk[k];
      for (int64_t m = k0; m < k; ++m) d -= a[m * n + k] * a[m * n + k];
      if (!(d > 0) || !std::isfinite(d)) return k;
      rk[k] = std::sqrt(d);
      for (int64_t j = k + 1; j < right; ++j) {
        double s = rk[j];
        for (int64_t m = k0; m < k; ++m) s -= a[m * n + k] * a[m * n + j];
        rk[j] = s / rk[k];
      }
    }
    // The panel's rows right of the diagonal block, split over column chunks.
    const int64_t cols = n - right;
    const int64_t chunks = (cols + kCacheCols - 1) / kCacheCols;
    for_items(chunks, static_cast<double>(kb * kb * kCacheCols), [&](int64_t c) {
      const int64_t j0 = right + c * kCacheCols, j1 = std::min(n, j0 + kCacheCols);
      for (int64_t k = k0; k < right; ++k) {
        double* rk = a + k * n;
        for (int64_t m = k0; m < k; ++m) {
          const double f = a[m * n + k];
          const double* rm = a + m * n;
          for (int64_t j = j0; j < j1; ++j) rk[j] -= f * rm[j];
        }
        const double inv = rk[k];
        for (int64_t j = j0; j < j1; ++j) rk[j] /= inv;
      }
    });
    // Trailing update, by blocks of rows of A22 (each from its diagonal on).
    constexpr int64_t kRows = 32;
    const int64_t row_blocks = (cols + kRows - 1) / kRows;
    for_items(row_blocks, static_cast<double>(kb * kRows * cols / 2 + 1), [&](int64_t b) {
      const int64_t i0 = right + b * kRows, m = std::min(kRows, n - i0);
      const double* panel = a + k0 * n;
      gemm<true>(a + i0 * n + i0, n, panel + i0, n, panel + i0, n, m, n - i0, kb);
    });
  }
  return -1;
}

void reversed_inverse_of_transpose(const double* r, double* out, int64_t n) {
  // Row q of (Rᵀ)⁻¹ is the y with R y = e_q (entries above q are 0): back substitution,
  // y[k] = −(Σ_{m=k+1..q} R[k][m] y[m]) / R[k][k]. Eight rows share each pass over R.
  constexpr int64_t kRhs = 8;
  for (int64_t i = 0; i < n * n; ++i) out[i] = 0;
  const int64_t blocks = (n + kRhs - 1) / kRhs;
  for_items(blocks, static_cast<double>(n) * n * kRhs / 2, [&](int64_t item) {
    const int64_t b = blocks - 1 - item; // the largest first
    const int64_t q0 = b * kRhs, nq = std::min(kRhs, n - q0), top = q0 + nq; // y[s][m] = 0 for m >= top
    std::vector<double> y(static_cast<size_t>(kRhs * top), 0.0);
    for (int64_t k = top - 1; k >= 0; --k) {
      const double* rk = r + k * n;
      double acc[kRhs] = {};
      for (int64_t m = k + 1; m < top; ++m)
        for (int64_t s = 0; s < nq; ++s) acc[s] += rk[m] * y[static_cast<size_t>(m * kRhs + s)];
      for (int64_t s = 0; s < nq; ++s) {
        const int64_t q = q0 + s;
        double& ys = y[static_cast<size_t>(k * kRhs + s)];
        if (k > q) ys = 0;
        else if (k == q) ys = 1.0 / rk[k];
        else ys = -acc[s] / rk[k];
      }
    }
    for (int64_t s = 0; s < nq; ++s) {
      const int64_t q = q0 + s;
      double* row = out + (n - 1 - q) * n;
      for (int64_t k = 0; k <= q; ++k) row[n - 1 - k] = y[static_cast<size_t>(k * kRhs + s)];
    }
  });
}

} // namespace ninfer::quantize_detail
