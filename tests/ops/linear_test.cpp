#include <gtest/gtest.h>

#include <tuple>

#include "ninfer/abi/ops/linear.h"
#include "op_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

// Shapes cross every edge of the kernel's tiling: token tiles of 4 (T = 1, 3, 4, 5, 67), weight
// row pairs (N odd / even), 8-lane k blocks with and without a tail (K = 7, 64, 129), and row
// strides wider than the rows.
TEST(LinearOp, MatchesDoubleOracleForF32AndBf16Weights) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("linear");
  for (int32_t dtype : {NINFER_DTYPE_F32, NINFER_DTYPE_BF16})
    for (auto [T, K, N] : {std::tuple<int64_t, int32_t, int32_t>{1, 64, 130}, {3, 7, 3}, {4, 129, 1}, {5, 64, 9},
                           {67, 129, 70}, {1, 300, 257}}) {
      const int64_t xs = K + 3, ys = N + 2;
      auto x = randn(rng, T * xs);
      const LinearWeights lw = random_linear_weights(rng, N, K, dtype);
      const std::vector<float>& w = lw.f;
      std::vector<double> want;
      for (int64_t t = 0; t < T; ++t)
        for (int32_t n = 0; n < N; ++n) {
          double s = 0;
          for (int32_t k = 0; k < K; ++k) s += double(x[t * xs + k]) * w[static_cast<size_t>(n) * K + k];
          want.push_back(s);
        }
      auto y = poisoned(T * ys);
      ninfer_linear_args a{x.data(), xs, lw.data(), y.data(), ys, T, K, N, dtype};
      be.run(NINFER_OP_LINEAR, {T, {K, N, 0, 0}, dtype}, &a);
      std::vector<float> got;
      for (int64_t t = 0; t < T; ++t)
        for (int32_t n = 0; n < N; ++n) got.push_back(y[t * ys + n]);
      const Mismatch m = compare(got, want, kFloat32Exact);
      EXPECT_TRUE(m.ok) << "dtype " << dtype << " T=" << T << " K=" << K << " N=" << N << ": " << m.describe();
      for (int64_t t = 0; t < T; ++t)
        for (int64_t n = N; n < ys; ++n) ASSERT_TRUE(std::isnan(y[t * ys + n])) << "wrote past the row";
    }
}
