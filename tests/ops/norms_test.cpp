#include <gtest/gtest.h>

#include "ninfer/abi/ops/gated_rms_norm.h"
#include "ninfer/abi/ops/l2_norm.h"
#include "ninfer/abi/ops/rms_norm.h"
#include "op_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

double rms_inv(const double* x, int n, double eps) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  return 1 / std::sqrt(ss / n + eps);
}

double silu(double z) { return z / (1 + std::exp(-z)); }

} // namespace

// Plain and (1+w) forms, with and without the fused residual, on one row per token.
TEST(RmsNormOp, RowsWithAndWithoutResidual) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("rms_norm rows");
  const int32_t dim = 96;
  const int64_t T = 13;
  const float eps = 1e-6f;
  for (int32_t offset : {0, 1})
    for (bool with_residual : {false, true}) {
      auto x = randn(rng, T * dim, 3.f), w = randn(rng, dim, 0.5f), res = randn(rng, T * dim);
      if (!offset)
        for (auto& v : w) v += 1.f;
      std::vector<double> s(T * dim), want_y(T * dim);
      for (size_t i = 0; i < s.size(); ++i) s[i] = double(x[i]) + (with_residual ? double(res[i]) : 0.0);
      for (int64_t t = 0; t < T; ++t) {
        const double inv = rms_inv(&s[t * dim], dim, eps);
        for (int i = 0; i < dim; ++i) want_y[t * dim + i] = s[t * dim + i] * inv * (offset + double(w[i]));
      }
      auto y = poisoned(T * dim);
      ninfer_rms_norm_args a{x.data(), dim, 0, with_residual ? res.data() : nullptr, dim, 0, w.data(),
                             y.data(), dim, 0, T, 1, dim, eps, offset};
      be.run(NINFER_OP_RMS_NORM, {T, {dim, 1, 0, 0}, NINFER_DTYPE_F32}, &a);
      const Mismatch m = compare(y, want_y, kFloat32Exact);
      EXPECT_TRUE(m.ok) << "offset " << offset << " residual " << with_residual << ": " << m.describe();
      if (with_residual) {
        const Mismatch mr = compare(res, s, kFloat32Exact);
        EXPECT_TRUE(mr.ok) << "residual after the add: " << mr.describe();
      }
    }
}

// Per-head q norm in place on Qwen3.5's q_proj layout: per token [heads x (query | gate)].
TEST(RmsNormOp, PerHeadInPlaceOnStridedRows) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("rms_norm per head");
  const int32_t hd = 32, heads = 5;
  const int64_t T = 7, token_stride = heads * 2 * hd + 3, head_stride = 2 * hd;
  auto buf = randn(rng, T * token_stride, 2.f), w = randn(rng, hd, 0.3f);
  const auto before = buf;
  std::vector<double> want;
  std::vector<float> got;
  ninfer_rms_norm_args a{buf.data(), token_stride, head_stride, nullptr, 0, 0, w.data(), buf.data(),
                         token_stride, head_stride, T, heads, hd, 1e-6f, 1};
  be.run(NINFER_OP_RMS_NORM, {T, {hd, heads, 0, 0}, NINFER_DTYPE_F32}, &a);
  for (int64_t t = 0; t < T; ++t)
    for (int h = 0; h < heads; ++h) {
      const int64_t at = t * token_stride + h * head_stride;
      std::vector<double> row(before.begin() + at, before.begin() + at + hd);
      const double inv = rms_inv(row.data(), hd, 1e-6);
      for (int i = 0; i < hd; ++i) {
        want.push_back(row[i] * inv * (1 + double(w[i])));
        got.push_back(buf[at + i]);
        // The gate half next to each query must be untouched.
        ASSERT_EQ(buf[at + hd + i], before[at + hd + i]);
      }
    }
  const Mismatch m = compare(got, want, kFloat32Exact);
  EXPECT_TRUE(m.ok) << m.describe();
}

TEST(L2NormOp, NormalisesHeadRowsInPlace) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("l2_norm");
  const int32_t dim = 16, heads = 3;
  const int64_t T = 9, token_stride = 100;
  auto x = randn(rng, T * token_stride, 2.f);
  const auto before = x;
  ninfer_l2_norm_args a{x.data(), token_stride, dim, T, heads, dim, 1e-6f};
  be.run(NINFER_OP_L2_NORM, {T, {dim, heads, 0, 0}, NINFER_DTYPE_F32}, &a);
  std::vector<float> got;
  std::vector<double> want;
  for (int64_t t = 0; t < T; ++t)
    for (int h = 0; h < heads; ++h) {
      const int64_t at = t * token_stride + h * dim;
      double ss = 0;
      for (int i = 0; i < dim; ++i) ss += double(before[at + i]) * before[at + i];
      for (int i = 0; i < dim; ++i) {
        want.push_back(before[at + i] / std::sqrt(ss + 1e-6));
        got.push_back(x[at + i]);
      }
    }
  const Mismatch m = compare(got, want, kFloat32Exact);
  EXPECT_TRUE(m.ok) << m.describe();
  for (int64_t i = heads * dim; i < token_stride; ++i) EXPECT_EQ(x[i], before[i]) << "outside the heads";
}

TEST(GatedRmsNormOp, NormTimesWeightTimesSiluOfGate) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("gated_rms_norm");
  const int32_t dim = 16, heads = 4;
  const int64_t T = 10, xs = heads * dim, zs = heads * dim + 8;
  auto x = randn(rng, T * xs, 2.f), z = randn(rng, T * zs, 2.f), w = randn(rng, dim, 0.3f);
  for (auto& v : w) v += 1.f;
  std::vector<double> want(T * xs);
  for (int64_t t = 0; t < T; ++t)
    for (int h = 0; h < heads; ++h) {
      std::vector<double> row(x.begin() + t * xs + h * dim, x.begin() + t * xs + (h + 1) * dim);
      const double inv = rms_inv(row.data(), dim, 1e-6);
      for (int i = 0; i < dim; ++i)
        want[t * xs + h * dim + i] = row[i] * inv * w[i] * silu(z[t * zs + h * dim + i]);
    }
  auto y = poisoned(T * xs);
  ninfer_gated_rms_norm_args a{x.data(), xs, z.data(), zs, w.data(), y.data(), xs, T, heads, dim, 1e-6f};
  be.run(NINFER_OP_GATED_RMS_NORM, {T, {dim, heads, 0, 0}, NINFER_DTYPE_F32}, &a);
  const Mismatch m = compare(y, want, kFloat32Exact);
  EXPECT_TRUE(m.ok) << m.describe();
}
