// The CPU plugin's emulation variants: `linear/emulate_bf16_x` (the numerics of the CUDA
// `cublaslt` route), `norm_linear/emulate_bf16_x` (the CUDA route of several tokens) and `attention/emulate_mma_f16` (the numerics of the CUDA tensor-core
// prefill). They are the reference that separates what a GPU kernel gets wrong from what its
// 16-bit inputs cost (tests/gpu_models/large_model_test.cpp), so each is checked here against
// an oracle written independently: fp16 rounding from its definition and the test's bf16
// helper, the tile-wise softmax in closed form rather than as a running loop.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "ninfer/abi/ops/attention.h"
#include "ninfer/abi/ops/linear.h"
#include "norm_linear_case.hpp"
#include "kv_blocks.hpp"
#include "op_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

double row_rel_l2(const float* got, const double* want, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

// x rounded to the nearest IEEE half (ties to even) from its definition, in double where every
// step is exact: 11 significant bits, the subnormal quantum 2^-24 below 2^-14, infinite past
// 65504. (The plugin uses the compiler's _Float16 conversion.)
float f16(float x) {
  if (!std::isfinite(x) || x == 0.f) return x;
  int e;
  std::frexp(static_cast<double>(x), &e); // |x| in [2^(e-1), 2^e)
  const double quantum = std::ldexp(1.0, std::max(e - 11, -24));
  const double r = std::nearbyint(static_cast<double>(x) / quantum) * quantum;
  if (std::fabs(r) > 65504.0) return x > 0 ? INFINITY : -INFINITY;
  return static_cast<float>(r);
}

} // namespace

// x rounded to bf16 (nearest even) for bf16 weights, x as it is for float32 weights; then the
// product to float32 accuracy.
TEST(PrecisionEmulation, LinearRoundsTheActivationToBf16ForBf16Weights) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("linear emulation");
  for (int32_t dtype : {NINFER_DTYPE_BF16, NINFER_DTYPE_F32})
    for (auto [T, K, N] : {std::tuple<int64_t, int32_t, int32_t>{1, 64, 33}, {9, 129, 70}, {70, 96, 5}}) {
      const int64_t xs = K + 3, ys = N + 2;
      auto x = randn(rng, T * xs);
      const LinearWeights lw = random_linear_weights(rng, N, K, dtype);
      const std::vector<float>& w = lw.f;
      std::vector<double> want, unrounded;
      for (int64_t t = 0; t < T; ++t)
        for (int32_t n = 0; n < N; ++n) {
          double s = 0, u = 0;
          for (int32_t k = 0; k < K; ++k) {
            const float xv = x[t * xs + k];
            const float xr = dtype == NINFER_DTYPE_BF16 ? from_bf16(to_bf16(xv)) : xv;
            s += double(xr) * w[static_cast<size_t>(n) * K + k];
            u += double(xv) * w[static_cast<size_t>(n) * K + k];
          }
          want.push_back(s);
          unrounded.push_back(u);
        }
      auto y = poisoned(T * ys);
      ninfer_linear_args a{x.data(), xs, lw.data(), y.data(), ys, T, K, N, dtype, /*accumulate=*/0};
      be.run_variant(NINFER_OP_LINEAR, "emulate_bf16_x", {T, {K, N, 0, 0}, dtype}, &a);
      std::vector<float> got;
      for (int64_t t = 0; t < T; ++t)
        for (int32_t n = 0; n < N; ++n) got.push_back(y[t * ys + n]);
      const Mismatch m = compare(got, want, kFloat32Exact);
      EXPECT_TRUE(m.ok) << "dtype " << dtype << " T=" << T << " K=" << K << " N=" << N << ": " << m.describe();
      if (dtype == NINFER_DTYPE_BF16) // the rounding is really applied: the unrounded product is further off
        EXPECT_FALSE(compare(got, unrounded, kFloat32Exact).ok) << "T=" << T << ": x was not rounded";
      for (int64_t t = 0; t < T; ++t)
        for (int64_t n = N; n < ys; ++n) ASSERT_TRUE(std::isnan(y[t * ys + n])) << "wrote past the row";
    }
}

// norm_linear's emulation: the CUDA plugin runs several tokens as rms_norm, then `cublaslt` (x
// rounded to bf16), then silu_mul. So the product takes the normed rows rounded to bf16 (bf16
// weights; float32 weights: as they are) while the normed rows the caller keeps stay float32.
// The oracle rounds the kept rows with the test's own helper and multiplies in float64.
TEST(PrecisionEmulation, NormLinearRoundsTheNormedRowsToBf16ForBf16Weights) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("norm_linear emulation");
  for (int32_t dtype : {NINFER_DTYPE_BF16, NINFER_DTYPE_F32})
    for (const NormLinearShape& s : {NormLinearShape{136, 70, true}, NormLinearShape{64, 48, false}})
      for (int64_t T : {9, 17}) {
        const NormLinearCase c = NormLinearCase::random(rng, s, T, dtype, /*offset=*/1);
        std::vector<float> y = poisoned(static_cast<size_t>(T * c.y_stride()));
        std::vector<float> normed = poisoned(static_cast<size_t>(T * c.normed_stride()));
        const ninfer_norm_linear_args a = c.args(c.x.data(), c.norm_w.data(), c.w_data(), y.data(), normed.data());
        be.run_variant(NINFER_OP_NORM_LINEAR, "emulate_bf16_x", c.planning_shape(), &a);
        const std::string what = c.describe();
        size_t stray = 0;
        const std::vector<float> kept = unpad(normed, T, s.K, c.normed_stride(), stray);
        std::vector<double> contract_y, contract_normed;
        c.oracle(contract_y, contract_normed);
        const Mismatch mn = compare(kept, contract_normed, kFloat32Exact);
        ASSERT_TRUE(mn.ok) << what << ": the kept normed rows are not the float32 norm: " << mn.describe();
        std::vector<double> want;
        for (int64_t t = 0; t < T; ++t) {
          std::vector<double> p(static_cast<size_t>(s.N));
          for (int32_t n = 0; n < s.N; ++n)
            for (int32_t k = 0; k < s.K; ++k) {
              const float xn = kept[static_cast<size_t>(t * s.K + k)];
              const float xr = dtype == NINFER_DTYPE_BF16 ? from_bf16(to_bf16(xn)) : xn;
              p[static_cast<size_t>(n)] += double(xr) * c.w[static_cast<size_t>(n) * s.K + k];
            }
          for (int32_t n = 0; n < s.outs(); ++n) {
            const double g = p[static_cast<size_t>(n)];
            want.push_back(s.gated ? g / (1 + std::exp(-g)) * p[static_cast<size_t>(n + s.outs())] : g);
          }
        }
        const std::vector<float> got = unpad(y, T, s.outs(), c.y_stride(), stray);
        EXPECT_EQ(stray, 0u) << what << ": wrote y padding";
        const Mismatch m = compare(got, want, kFloat32Exact);
        EXPECT_TRUE(m.ok) << what << ": " << m.describe();
        if (dtype == NINFER_DTYPE_BF16) // the rounding is really applied: the float32 contract is further off
          EXPECT_FALSE(compare(got, contract_y, kFloat32Exact).ok) << what << ": the normed rows were not rounded";
      }
}

// Two sequences (100 prompt tokens from position 0: three full key tiles of 32 and a partial
// one; 40 tokens continuing at position 60), GQA 4 over 2, head dim 64. The oracle: q * (scale
// log2 e) then q, K, V to fp16; tile b's weights exp2(s - M_b) rounded to fp16, where M_b is
// the largest score of tiles 0..b (the running max when tile b is taken); the output is
// sum_j w_j 2^(M_b(j) - M) v_j / sum_j w_j 2^(M_b(j) - M).
TEST(PrecisionEmulation, AttentionRoundsLikeTheTensorCorePrefill) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("attention emulation");
  constexpr int32_t kSlots = 2, kCap = 128, kKv = 2, kHd = 64, kHeads = 4, kTile = 32;
  const int64_t kv_row = int64_t{kKv} * kHd;
  auto kc = randn(rng, size_t(kSlots) * kCap * kv_row), vc = randn(rng, size_t(kSlots) * kCap * kv_row);
  const auto layout = KvBlockLayout::identity(kSlots, kCap, kCap); // contiguous: the oracle indexes it so
  const ninfer_kv_cache cache = layout.cache(kc.data(), vc.data(), kKv, kHd, NINFER_DTYPE_F32);
  TokenBatch tb;
  tb.add(0, 0, 100);
  tb.add(1, 60, 40);
  const int64_t T = tb.tokens(), q_stride = int64_t{kHeads} * kHd + 3, out_stride = int64_t{kHeads} * kHd + 1;
  auto q = randn(rng, T * q_stride, 2.f); // scores of spread ~2 after scaling: real softmax peaks
  auto out = poisoned(T * out_stride);
  const float scale = 1.f / std::sqrt(float(kHd));
  const ninfer_token_batch batch = tb.batch();
  ninfer_attention_args a{q.data(), q_stride, kHd, cache, batch, out.data(), out_stride, T, kHeads, scale};
  be.run_variant(NINFER_OP_ATTENTION, "emulate_mma_f16", {T, {kHd, kHeads, kKv, 100}, NINFER_DTYPE_F32}, &a);

  double worst_vs_oracle = 0, worst_vs_exact = 0, least_vs_exact = INFINITY;
  const float qscale = scale * 1.4426950408889634f;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t slot = tb.seq_slot[tb.token_seq[t]], pos = tb.token_pos[t];
    for (int32_t h = 0; h < kHeads; ++h) {
      const int32_t g = h / (kHeads / kKv);
      const float* qr = q.data() + t * q_stride + int64_t{h} * kHd;
      auto key = [&](const std::vector<float>& c, int32_t j, int32_t d) {
        return c[(size_t(slot) * kCap + j) * kv_row + size_t(g) * kHd + d];
      };
      std::vector<double> s(pos + 1), exact_s(pos + 1);
      for (int32_t j = 0; j <= pos; ++j) {
        double dot = 0, ex = 0;
        for (int32_t d = 0; d < kHd; ++d) {
          dot += double(f16(qr[d] * qscale)) * f16(key(kc, j, d));
          ex += double(qr[d]) * key(kc, j, d);
        }
        s[j] = dot;
        exact_s[j] = ex * scale;
      }
      std::vector<double> run_max(pos + 1); // M_b of key j's tile
      double m = -INFINITY;
      for (int32_t j0 = 0; j0 <= pos; j0 += kTile) {
        for (int32_t j = j0; j <= std::min(pos, j0 + kTile - 1); ++j) m = std::max(m, s[j]);
        for (int32_t j = j0; j <= std::min(pos, j0 + kTile - 1); ++j) run_max[j] = m;
      }
      const double ex_max = *std::max_element(exact_s.begin(), exact_s.end());
      std::vector<double> want(kHd, 0.0), exact(kHd, 0.0);
      double sum = 0, ex_sum = 0;
      for (int32_t j = 0; j <= pos; ++j) {
        const double w = double(f16(static_cast<float>(std::exp2(s[j] - run_max[j])))) * std::exp2(run_max[j] - m);
        const double e = std::exp(exact_s[j] - ex_max);
        sum += w;
        ex_sum += e;
        for (int32_t d = 0; d < kHd; ++d) {
          want[d] += w * f16(key(vc, j, d));
          exact[d] += e * key(vc, j, d);
        }
      }
      for (int32_t d = 0; d < kHd; ++d) {
        want[d] /= sum;
        exact[d] /= ex_sum;
      }
      const float* got = out.data() + t * out_stride + int64_t{h} * kHd;
      worst_vs_oracle = std::max(worst_vs_oracle, row_rel_l2(got, want.data(), kHd));
      const double e = row_rel_l2(got, exact.data(), kHd);
      worst_vs_exact = std::max(worst_vs_exact, e);
      least_vs_exact = std::min(least_vs_exact, e);
    }
  }
  // Only summation order (double against double) and the float32 output differ from the oracle.
  EXPECT_LE(worst_vs_oracle, 1e-6);
  // fp16 inputs (unit roundoff 2^-11) move a row by a few 1e-4 of itself: visible, and far
  // below what a wrong key or tile would cost (docs/cuda-attention.md).
  EXPECT_LE(worst_vs_exact, 5e-3);
  EXPECT_GE(least_vs_exact, 1e-6) << "no row moved: the inputs were not rounded";
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = int64_t{kHeads} * kHd; i < out_stride; ++i)
      ASSERT_TRUE(std::isnan(out[t * out_stride + i])) << "wrote past the row";
}
