// Dense float64 linear algebra for GPTQ, on row-major square or rectangular matrices: the
// Gram accumulation of activations, an upper Cholesky factorisation and the inverse of its
// transpose, and the rank-b update of the lazy column blocks. No BLAS is linked (docs/
// architecture.md, "Dependencies"), so these are blocked loops over the host's cores. Every
// element is summed in a fixed order whatever the thread count: the results do not depend on it.
#pragma once

#include <cstdint>

namespace ninfer::quantize_detail {

// C[i][j] ∓= Σ_t A(i, t) · B(t, j) for i < m, j < n, t < depth (subtracting when `subtract`),
// with A(i, t) = a[t · lda + i] and B(t, j) = b[t · ldb + j]; each C element takes its terms in
// t order. Runs on the calling thread.
void gemm_acc(double* c, int64_t ldc, const double* a, int64_t lda, const double* b, int64_t ldb, int64_t m, int64_t n,
              int64_t depth, bool subtract);

// H += Xᵀ X on the upper triangle (j >= i) of the k x k matrix h, for `rows` rows of x (k
// float32 values each, `stride` apart). The products are exact in float64; the sums are taken in
// row order.
void gram_accumulate(double* h, int64_t k, const float* x, int64_t rows, int64_t stride);

// Copies the upper triangle onto the lower one.
void symmetrize_from_upper(double* a, int64_t n);

// A = Rᵀ R in place on the upper triangle (R upper, positive diagonal; the lower triangle is
// overwritten with scratch values). Returns -1, or the first column whose pivot is not positive (A is not positive
// definite there, or not finite).
int64_t cholesky_upper(double* a, int64_t n);

// For R upper triangular (from cholesky_upper), writes into `out` (n x n) the reversal of
// (Rᵀ)⁻¹: out[n−1−r][n−1−k] = (Rᵀ)⁻¹[r][k]. That is the upper triangular U of the reversed
// problem (see gptq.cpp); the lower triangle of `out` is zeroed.
void reversed_inverse_of_transpose(const double* r, double* out, int64_t n);

} // namespace ninfer::quantize_detail
