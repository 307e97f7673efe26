// The Hessian GPTQ weighs rounding errors with: H = Σ x xᵀ over the rows x a module reads (its
// layer's reconstruction error ‖X Wᵀ − X Ŵᵀ‖² is (W − Ŵ) H (W − Ŵ)ᵀ summed over outputs). Sums
// in float64 of float32 rows: each product is exact, the sums are taken in row order on the host's
// cores, and the result does not depend on the thread count.
#pragma once

#include <cstdint>
#include <vector>

namespace ninfer {

class HessianSum {
 public:
  explicit HessianSum(int64_t cols); // K x K zeros: K² doubles of host memory
  // Adds `rows` rows of cols() floats, `stride` floats apart.
  void add(const float* x, int64_t rows, int64_t stride);
  int64_t cols() const { return cols_; }
  int64_t rows() const { return rows_; }
  // H, K x K row-major and symmetric; the sum is emptied.
  std::vector<double> take();

 private:
  int64_t cols_;
  int64_t rows_ = 0;
  std::vector<double> upper_; // the upper triangle is summed; take() mirrors it
};

} // namespace ninfer
