#include <gtest/gtest.h>

#include <string>
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
      ninfer_linear_args a{x.data(), xs, lw.data(), y.data(), ys, T, K, N, dtype, /*accumulate=*/0};
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

// accumulate = 1 adds x.W^T to y's previous contents (y0 random); accumulate = 0 ignores them
// (y starts NaN, which would poison any read). Every CPU variant of linear, by name, so a new
// variant cannot skip the flag. The oracle is float64; `emulate_bf16_x` with bf16 weights is
// specified to round x to bf16 first, so its oracle does too.
TEST(LinearOp, AccumulateAddsToYAndZeroIgnoresItInEveryVariant) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("linear accumulate");
  const auto variants = op_test_plugins().find("cpu")->variants_for(NINFER_OP_LINEAR);
  ASSERT_GE(variants.size(), 2u) << "blocked and emulate_bf16_x at least";
  for (const ninfer_variant* v : variants)
    for (int32_t dtype : {NINFER_DTYPE_F32, NINFER_DTYPE_BF16})
      for (auto [T, K, N] : {std::tuple<int64_t, int32_t, int32_t>{1, 64, 130}, {3, 7, 3}, {17, 129, 70},
                             {1, 301, 257}, {17, 33, 9}}) {
        const std::string where = std::string(v->name) + " dtype " + std::to_string(dtype) + " T=" +
                                  std::to_string(T) + " K=" + std::to_string(K) + " N=" + std::to_string(N);
        const bool round_x = std::string(v->name) == "emulate_bf16_x" && dtype == NINFER_DTYPE_BF16;
        const int64_t xs = K + 3, ys = N + 2;
        auto x = randn(rng, T * xs);
        const LinearWeights lw = random_linear_weights(rng, N, K, dtype);
        const auto y0 = randn(rng, T * ys);
        std::vector<double> dot;
        for (int64_t t = 0; t < T; ++t)
          for (int32_t n = 0; n < N; ++n) {
            double s = 0;
            for (int32_t k = 0; k < K; ++k) {
              const float xv = round_x ? from_bf16(to_bf16(x[t * xs + k])) : x[t * xs + k];
              s += double(xv) * lw.f[static_cast<size_t>(n) * K + k];
            }
            dot.push_back(s);
          }
        for (int32_t accumulate : {1, 0}) {
          std::vector<float> y = accumulate ? y0 : poisoned(T * ys);
          ninfer_linear_args a{x.data(), xs, lw.data(), y.data(), ys, T, K, N, dtype, accumulate};
          be.run_variant(NINFER_OP_LINEAR, v->name, {T, {K, N, 0, 0}, dtype}, &a);
          std::vector<float> got;
          std::vector<double> want;
          for (int64_t t = 0; t < T; ++t)
            for (int32_t n = 0; n < N; ++n) {
              got.push_back(y[t * ys + n]);
              want.push_back(dot[t * N + n] + (accumulate ? double(y0[t * ys + n]) : 0.0));
            }
          const Mismatch m = compare(got, want, kFloat32Exact);
          EXPECT_TRUE(m.ok) << where << " accumulate=" << accumulate << ": " << m.describe();
          for (int64_t t = 0; t < T; ++t)
            for (int64_t n = N; n < ys; ++n) { // the padding past each row is untouched
              if (accumulate)
                ASSERT_EQ(y[t * ys + n], y0[t * ys + n]) << where << ": wrote past the row";
              else
                ASSERT_TRUE(std::isnan(y[t * ys + n])) << where << ": wrote past the row";
            }
        }
      }
}
