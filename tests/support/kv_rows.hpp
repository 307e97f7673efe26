// Head rows for the KV format tests (CPU and GPU): magnitudes spanning five decades (down into
// fp8's subnormal codes and fp16's subnormal scales), a few with an outlier channel, one all
// zero.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace ninfer::test {

inline std::vector<float> rows_with_spread(std::mt19937_64& rng, int64_t rows, int32_t hd) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(rows * hd));
  for (float& e : x) e = normal(rng);
  std::uniform_real_distribution<double> decade(-3.5, 1.5);
  std::uniform_int_distribution<int32_t> chan(0, hd - 1);
  for (int64_t r = 0; r < rows; ++r) {
    const float m = static_cast<float>(std::pow(10.0, decade(rng)));
    for (int32_t d = 0; d < hd; ++d) x[r * hd + d] *= m;
    if (r % 5 == 1) x[r * hd + chan(rng)] *= 30.f;
  }
  std::fill(x.begin(), x.begin() + hd, 0.f);
  return x;
}

} // namespace ninfer::test
