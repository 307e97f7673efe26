#include "matrix_choice.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace ninfer::tools {

std::string matrix_name(const MatrixDims& dims) {
  std::string s = fmt::format("{}x{}", dims[0], dims[1]);
  if (dims[2]) s += fmt::format(" dims[2]={}", dims[2]);
  return s;
}

std::vector<MatrixChoice> matrix_choices(const std::vector<MatrixTimes>& measured, const std::string& bucket_variant) {
  std::vector<MatrixChoice> out;
  for (const MatrixTimes& m : measured) {
    const auto chosen = m.us.find(bucket_variant);
    if (chosen == m.us.end()) continue;
    const auto best = std::min_element(m.us.begin(), m.us.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
    if (best->first == bucket_variant || !(best->second < chosen->second * (1 - kMatrixMargin))) continue;
    out.push_back({m.dims, best->first, best->second, chosen->second});
  }
  return out;
}

} // namespace ninfer::tools
