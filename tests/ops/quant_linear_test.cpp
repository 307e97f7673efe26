// linear and norm_linear on quantized weights (INT4, INT8, FP8_E4M3 in the canonical layout,
// ninfer/abi/ops/quant_weight.h) on the CPU reference plugin, against the float64 contract:
// random codes, scales in float32 / bfloat16 / float16, with and without zero points and a
// shuffled g_idx, group sizes that divide K, that do not, and one group per row; odd K (the
// last int4 byte half used), odd N, strided rows, poisoned outputs; and the refusals.
#include <gtest/gtest.h>

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
          std::vector<double> want;
          for (int64_t t = 0; t < s.T; ++t)
            for (int32_t n = 0; n < s.N; ++n) {
              double acc = accumulate ? y[static_cast<size_t>(t * ys + n)] : 0.0;
              for (int32_t k = 0; k < s.K; ++k)
                acc += double(x[static_cast<size_t>(t * xs + k)]) * wd[static_cast<size_t>(n) * s.K + k];
              want.push_back(acc);
            }
          const ninfer_quant_weight q = w.wq();
          ninfer_linear_args a{x.data(), xs, w.codes.data(), y.data(), ys, s.T, s.K, s.N, l.dtype, accumulate, &q};
          be.run(NINFER_OP_LINEAR, {s.T, {s.K, s.N, 0, 0}, l.dtype}, &a);
          std::vector<float> got;
          for (int64_t t = 0; t < s.T; ++t)
            for (int32_t n = 0; n < s.N; ++n) got.push_back(y[static_cast<size_t>(t * ys + n)]);
          const Mismatch m = compare(got, want, kFloat32Exact);
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
