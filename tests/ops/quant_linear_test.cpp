// linear and norm_linear on quantized weights (INT4, INT8, FP8_E4M3 in the canonical layout,
// ninfer/abi/ops/quant_weight.h) on the CPU reference plugin, against the float64 contract:
// random codes, scales in float32 / bfloat16 / float16, with and without zero points and a
// shuffled g_idx, group sizes that divide K, that do not, and one group per row; odd K (the
// last int4 byte half used), odd N, strided rows, poisoned outputs; and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>

#include "ninfer/abi/ops/linear.h"
#include "ninfer/abi/ops/norm_linear.h"
#include "ninfer/planning/planner.hpp"
#include "ninfer/support/error.hpp"
#include "norm_linear_case.hpp"
#include "op_test_env.hpp"
#include "quant_weight_case.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

struct QuantShape {
  int64_t T;
  int32_t K, N, group;
};
// K = 129 with group 32 leaves a partial last group; group = K is one group per row.
const QuantShape kShapes[] = {{1, 64, 130, 32}, {3, 129, 9, 32}, {5, 96, 33, 96}, {17, 50, 8, 7}, {1, 33, 257, 16}};

struct Layout {
  int32_t dtype;
  bool zeros, g_idx;
};
const Layout kLayouts[] = {{NINFER_DTYPE_INT4, false, false}, {NINFER_DTYPE_INT4, true, false},
                           {NINFER_DTYPE_INT4, true, true},   {NINFER_DTYPE_INT8, false, true},
                           {NINFER_DTYPE_INT8, true, false},  {NINFER_DTYPE_FP8_E4M3, false, false}};
const int32_t kScaleDtypes[] = {NINFER_DTYPE_F32, NINFER_DTYPE_BF16, NINFER_DTYPE_F16};

// `float32-dot-of-dequantized-weights`: kFloat32Exact of the output, plus 4e-6 of the sum of
// the products' magnitudes, sum_k |x_k w_k|. The plugin sums float32 products (weights rounded
// to float32), whose rounding is relative to the terms, not to the result: a K = 256 int8 row
// whose terms (sum |x w| in the hundreds) cancel to -0.0134 came out 1.1e-5 off, just past
// kFloat32Exact's reach there (about one run in ten of the tiles test). Blocked float32 sums of K <= 4096 terms stay within sqrt(K) 2^-24 ~ 4e-6 of that
// sum; one misread code moves the output by |x_k| x its scale, 0.004-0.05 per unit of x.
constexpr double kDotOfTermsRel = 4e-6;
Mismatch compare_dots(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& terms) {
  Mismatch m;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(double(got[i]) - want[i]);
    const double reach = kFloat32Exact.abs + kFloat32Exact.rel * std::abs(want[i]) + kDotOfTermsRel * terms[i];
    if (std::isfinite(got[i]) && err <= reach) continue;
    if (m.ok) m.index = i, m.got = got[i], m.want = want[i];
    m.ok = false;
    ++m.count;
  }
  return m;
}

} // namespace

TEST(QuantLinear, MatchesTheFloat64ContractForEveryLayout) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("quantized linear");
  for (const Layout& l : kLayouts)
    for (int32_t sd : kScaleDtypes)
      for (const QuantShape& s : kShapes)
        for (int32_t accumulate : {0, 1}) {
          const QuantWeightCase w = QuantWeightCase::random(rng, l.dtype, s.N, s.K, s.group, sd, l.zeros, l.g_idx);
          const std::vector<double> wd = w.dequantized();
          const int64_t xs = s.K + 3, ys = s.N + 2;
          const auto x = randn(rng, static_cast<size_t>(s.T * xs));
          auto y = accumulate ? randn(rng, static_cast<size_t>(s.T * ys)) : poisoned(static_cast<size_t>(s.T * ys));
          for (int64_t t = 0; t < s.T; ++t)
            for (int64_t n = s.N; n < ys; ++n) y[static_cast<size_t>(t * ys + n)] = NAN; // padding stays NaN
          std::vector<double> want, terms;
          for (int64_t t = 0; t < s.T; ++t)
            for (int32_t n = 0; n < s.N; ++n) {
              double acc = accumulate ? y[static_cast<size_t>(t * ys + n)] : 0.0, mag = std::abs(acc);
              for (int32_t k = 0; k < s.K; ++k) {
                const double p = double(x[static_cast<size_t>(t * xs + k)]) * wd[static_cast<size_t>(n) * s.K + k];
                acc += p;
                mag += std::abs(p);
              }
              want.push_back(acc);
              terms.push_back(mag);
            }
          const ninfer_quant_weight q = w.wq();
          ninfer_linear_args a{x.data(), xs, w.codes.data(), y.data(), ys, s.T, s.K, s.N, l.dtype, accumulate, &q};
          be.run(NINFER_OP_LINEAR, {s.T, {s.K, s.N, 0, 0}, l.dtype}, &a);
          std::vector<float> got;
          for (int64_t t = 0; t < s.T; ++t)
            for (int32_t n = 0; n < s.N; ++n) got.push_back(y[static_cast<size_t>(t * ys + n)]);
          const Mismatch m = compare_dots(got, want, terms);
          EXPECT_TRUE(m.ok) << w.describe() << " T=" << s.T << " accumulate " << accumulate << ": " << m.describe();
          for (int64_t t = 0; t < s.T; ++t)
            for (int64_t n = s.N; n < ys; ++n)
              ASSERT_TRUE(std::isnan(y[static_cast<size_t>(t * ys + n)])) << w.describe() << ": wrote past the row";
        }
}

// norm_linear's gated output silu(g)·u of dot products over dequantized codes: g and u are sums
// of K terms of a few units each, so their float32 error (order K·2^-24·Σ|terms|, ~1e-4 here)
// reaches the product where silu(g)·u is small; a misread layout is off by O(1).
constexpr Tolerance kGatedQuantizedF32{"f32-gated-sums-of-dequantized-weights", 2e-4, 1e-3};

TEST(QuantLinear, NormLinearMatchesTheFloat64ContractGatedAndNot) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("quantized norm_linear");
  const NormLinearShape shapes[] = {{64, 48, false}, {136, 70, true}, {33, 10, true}};
  for (const Layout& l : kLayouts)
    for (int32_t sd : kScaleDtypes)
      for (const NormLinearShape& s : shapes)
        for (int64_t T : {1, 4}) {
          NormLinearCase c = NormLinearCase::random(rng, s, T, NINFER_DTYPE_F32, /*offset=*/1);
          const QuantWeightCase w = QuantWeightCase::random(rng, l.dtype, s.N, s.K, 16, sd, l.zeros, l.g_idx);
          const std::vector<double> wd = w.dequantized();
          for (size_t i = 0; i < wd.size(); ++i) c.w[i] = static_cast<float>(wd[i]); // the oracle's weights
          c.dtype = l.dtype;
          std::vector<float> y = poisoned(static_cast<size_t>(T * c.y_stride()));
          std::vector<float> normed = poisoned(static_cast<size_t>(T * c.normed_stride()));
          ninfer_norm_linear_args a = c.args(c.x.data(), c.norm_w.data(), w.codes.data(), y.data(), normed.data());
          const ninfer_quant_weight q = w.wq();
          a.wq = &q;
          be.reserve_workspace(NINFER_OP_NORM_LINEAR, c.planning_shape());
          be.run(NINFER_OP_NORM_LINEAR, c.planning_shape(), &a);
          std::vector<double> want_y, want_normed;
          c.oracle(want_y, want_normed);
          size_t stray = 0;
          const Mismatch m = compare(unpad(y, T, s.outs(), c.y_stride(), stray), want_y, kGatedQuantizedF32);
          EXPECT_TRUE(m.ok) << w.describe() << " " << s.describe() << " T=" << T << ": " << m.describe();
          EXPECT_EQ(stray, 0u);
        }
}

// The planner never routes a quantized call to a variant whose dtype_mask lacks its dtype:
// forcing emulate_bf16_x (float weights only) is refused, and its own route is one that takes it.
TEST(QuantLinear, PlannerRoutesQuantizedCallsOnlyToVariantsThatTakeThem) {
  Backend be = cpu_backend();
  for (const char* op : {NINFER_OP_LINEAR, NINFER_OP_NORM_LINEAR})
    for (int32_t dtype : {NINFER_DTYPE_INT4, NINFER_DTYPE_INT8, NINFER_DTYPE_FP8_E4M3}) {
      const ninfer_shape s{3, {64, 32, 0, 0}, dtype};
      const Plan p = be.planner().plan(op, s);
      ASSERT_NE(p.v, nullptr) << op;
      EXPECT_TRUE(p.v->dtype_mask & (1u << dtype)) << op << " routed " << ninfer_dtype_name(dtype) << " to " << p.variant;
      for (const ninfer_variant* v : op_test_plugins().find("cpu")->variants_for(op))
        if (!(v->dtype_mask & (1u << dtype))) {
          EXPECT_THROW(be.planner().plan_variant(*v, s), Error) << op << "/" << v->name;
        }
    }
}

// Codes in tiles (NINFER_QUANT_LAYOUT_TILES16) give the float64 contract's products, through
// linear and norm_linear: the same weights as row-major codes, laid out by quant_weight.h's
// formula (QuantWeightCase::tiled_codes), with a call on the first rows of a matrix too.
TEST(QuantLinear, CodesInTilesMatchTheFloat64Contract) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("quantized linear, codes in tiles");
  const QuantShape shapes[] = {{1, 256, 48, 128}, {3, 384, 32, 256}, {2, 128, 16, 128}};
  for (const Layout& l : kLayouts) {
    if (l.g_idx) continue; // a g_idx is a layout of groups, not of codes: covered above
    for (int32_t sd : kScaleDtypes)
      for (const QuantShape& s : shapes)
        for (int32_t rows : {s.N, s.N - 5}) {
          const QuantWeightCase w = QuantWeightCase::random(rng, l.dtype, s.N, s.K, s.group, sd, l.zeros, false);
          const std::vector<uint8_t> tiles = w.tiled_codes();
          // One piece per row (K = 128) is row-major already; wider rows move.
          if (s.K > 128) ASSERT_NE(tiles, w.codes) << w.describe() << ": the test's tiles moved nothing";
          const std::vector<double> wd = w.dequantized();
          const auto x = randn(rng, static_cast<size_t>(s.T * s.K));
          auto y = poisoned(static_cast<size_t>(s.T * rows));
          std::vector<double> want, terms;
          for (int64_t t = 0; t < s.T; ++t)
            for (int32_t n = 0; n < rows; ++n) {
              double acc = 0, mag = 0;
              for (int32_t k = 0; k < s.K; ++k) {
                const double p = double(x[static_cast<size_t>(t * s.K + k)]) * wd[static_cast<size_t>(n) * s.K + k];
                acc += p;
                mag += std::abs(p);
              }
              want.push_back(acc);
              terms.push_back(mag);
            }
          const ninfer_quant_weight q = w.wq_tiled();
          ninfer_linear_args a{x.data(), s.K, tiles.data(), y.data(), rows, s.T, s.K, rows, l.dtype, 0, &q};
          be.run(NINFER_OP_LINEAR, {s.T, {s.K, rows, s.group, NINFER_QUANT_LAYOUT_TILES16}, l.dtype}, &a);
          const Mismatch m = compare_dots(y, want, terms);
          EXPECT_TRUE(m.ok) << w.describe() << " tiles, T=" << s.T << " rows " << rows << ": " << m.describe();
        }
  }
  // norm_linear reads them the same way (gated: both halves from the one tiled matrix).
  for (bool gated : {false, true}) {
    const NormLinearShape s{256, 64, gated};
    NormLinearCase c = NormLinearCase::random(rng, s, 2, NINFER_DTYPE_F32, /*offset=*/1);
    const QuantWeightCase w = QuantWeightCase::random(rng, NINFER_DTYPE_INT4, s.N, s.K, 128, NINFER_DTYPE_BF16, true, false);
    const std::vector<double> wd = w.dequantized();
    for (size_t i = 0; i < wd.size(); ++i) c.w[i] = static_cast<float>(wd[i]);
    c.dtype = NINFER_DTYPE_INT4;
    const std::vector<uint8_t> tiles = w.tiled_codes();
    std::vector<float> y = poisoned(static_cast<size_t>(2 * c.y_stride()));
    std::vector<float> normed = poisoned(static_cast<size_t>(2 * c.normed_stride()));
    ninfer_norm_linear_args a = c.args(c.x.data(), c.norm_w.data(), tiles.data(), y.data(), normed.data());
    const ninfer_quant_weight q = w.wq_tiled();
    a.wq = &q;
    ninfer_shape shape = c.planning_shape();
    shape.dims[3] = NINFER_QUANT_LAYOUT_TILES16;
    be.reserve_workspace(NINFER_OP_NORM_LINEAR, shape);
    be.run(NINFER_OP_NORM_LINEAR, shape, &a);
    std::vector<double> want_y, want_normed;
    c.oracle(want_y, want_normed);
    size_t stray = 0;
    const Mismatch m = compare(unpad(y, 2, s.outs(), c.y_stride(), stray), want_y, kGatedQuantizedF32);
    EXPECT_TRUE(m.ok) << w.describe() << " tiles " << s.describe() << ": " << m.describe();
    EXPECT_EQ(stray, 0u);
  }
}

// Tiles need whole 128-column pieces, and a layout must be one the contract names: the planner
// finds no variant for such a shape, and a launch given one anyway is refused.
TEST(QuantLinear, RefusesTilesWithoutWholePiecesAndUnknownLayouts) {
  Backend be = cpu_backend();
  EXPECT_FALSE(be.has_variant(NINFER_OP_LINEAR, {1, {96, 32, 32, NINFER_QUANT_LAYOUT_TILES16}, NINFER_DTYPE_INT4}));
  EXPECT_FALSE(be.has_variant(NINFER_OP_LINEAR, {1, {128, 32, 128, 7}, NINFER_DTYPE_INT4}));
  EXPECT_TRUE(be.has_variant(NINFER_OP_LINEAR, {1, {128, 32, 128, NINFER_QUANT_LAYOUT_TILES16}, NINFER_DTYPE_INT4}));
  auto rng = fresh_rng("quantized linear, bad layouts");
  const QuantWeightCase w = QuantWeightCase::random(rng, NINFER_DTYPE_INT4, 16, 96, 32, NINFER_DTYPE_F16, false, false);
  const auto x = randn(rng, 96);
  auto y = poisoned(16);
  for (int32_t layout : {int32_t{NINFER_QUANT_LAYOUT_TILES16}, int32_t{7}}) {
    ninfer_quant_weight q = w.wq();
    q.layout = layout;
    ninfer_linear_args a{x.data(), 96, w.codes.data(), y.data(), 16, 1, 96, 16, NINFER_DTYPE_INT4, 0, &q};
    try {
      be.run_variant(NINFER_OP_LINEAR, "blocked", {1, {96, 16, 32, 0}, NINFER_DTYPE_INT4}, &a);
      ADD_FAILURE() << "expected an error for layout " << layout;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("layout"), std::string::npos) << e.what();
    }
  }
}

// A quantized dtype without its description, or with a g_idx entry outside the groups, is an
// error from the launch, not a read out of bounds.
TEST(QuantLinear, RefusesAMissingOrBadDescription) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("quantized linear refusals");
  QuantWeightCase w = QuantWeightCase::random(rng, NINFER_DTYPE_INT4, 8, 64, 32, NINFER_DTYPE_F16, false, true);
  const auto x = randn(rng, 64);
  auto y = poisoned(8);
  ninfer_linear_args a{x.data(), 64, w.codes.data(), y.data(), 8, 1, 64, 8, NINFER_DTYPE_INT4, 0, nullptr};
  const ninfer_shape s{1, {64, 8, 0, 0}, NINFER_DTYPE_INT4};
  try {
    be.run(NINFER_OP_LINEAR, s, &a);
    ADD_FAILURE() << "expected an error for wq = NULL";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("wq"), std::string::npos) << e.what();
  }
  w.g_idx[5] = 2; // 64 columns in groups of 32: groups 0 and 1
  const ninfer_quant_weight q = w.wq();
  a.wq = &q;
  try {
    be.run(NINFER_OP_LINEAR, s, &a);
    ADD_FAILURE() << "expected an error for a g_idx entry outside the groups";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("g_idx"), std::string::npos) << e.what();
  }
}
