#include "ninfer/quantize/hessian.hpp"

#include <cstddef>

#include "dense_f64.hpp"

namespace ninfer {

HessianSum::HessianSum(int64_t cols) : cols_(cols), upper_(static_cast<size_t>(cols * cols), 0.0) {}

void HessianSum::add(const float* x, int64_t rows, int64_t stride) {
  if (rows <= 0) return;
  quantize_detail::gram_accumulate(upper_.data(), cols_, x, rows, stride);
  rows_ += rows;
}

std::vector<double> HessianSum::take() {
  quantize_detail::symmetrize_from_upper(upper_.data(), cols_);
  std::vector<double> h = std::move(upper_);
  upper_ = {};
  return h;
}

} // namespace ninfer
