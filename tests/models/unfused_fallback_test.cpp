// Model code runs head_norm_rope (q/k norm + rotary embedding in one op), norm_linear (a
// block's norm + first projection (+ SwiGLU)), conv_l2_norm and gated_delta_step (a Gated
// DeltaNet decode step) only where the plugin has a variant for them; on a plugin without them
// (one written before the ops: here the CPU plugin built without them, cpu-unfused) the layers
// run the ops they fuse. On the CPU plugin both paths run the same row functions, so the logits
// must be the same bits, for Qwen3 (q and k rows back to back: one rope call) and Qwen3.5
// (gated q rows: a rope call each) — with one exception, Qwen3.5's calls of one token per
// sequence (decode steps, a one-token prompt, a prompt's last chunk of one token): there the
// fused path takes the gating's a and b from the layer's input projection (float32 sums,
// blocked) instead of gdn_gating's own (double sums). So for Qwen3.5 the rows of each longer
// prompt's first chunk must be the same bits and every later row is held to a tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "model_test_env.hpp"
#include "ninfer/abi/ops/conv_l2_norm.h"
#include "ninfer/abi/ops/gated_delta_step.h"
#include "ninfer/abi/ops/head_norm_rope.h"
#include "ninfer/abi/ops/norm_linear.h"

using namespace ninfer;
using namespace ninfer::test;

namespace {

// A decode logits row of the fused path against the unfused one: the gating projection's
// summation order (float32, blocked, vs double) moves a, b by ~1e-7 relative; through the
// layers that stays far below this.
constexpr double kGatingOrderRowRelL2 = 1e-5;

constexpr int32_t kPrefillChunk = 37; // prompts cross chunk edges

struct Logits {
  std::vector<float> first_chunks; // the first kPrefillChunk rows of each prompt of 2+ tokens
  std::vector<float> rest;         // every other prompt row, then the decode steps' rows
};

size_t bits_differ(const std::vector<float>& a, const std::vector<float>& b) {
  size_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return n;
}

// The worst row's |a - b| / |b| over rows of `vocab` logits.
double worst_row_rel_l2(const std::vector<float>& a, const std::vector<float>& b, size_t vocab) {
  double worst = 0;
  for (size_t r = 0; r + vocab <= a.size(); r += vocab) {
    double d = 0, n = 0;
    for (size_t i = r; i < r + vocab; ++i) {
      d += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
      n += static_cast<double>(b[i]) * b[i];
    }
    worst = std::max(worst, std::sqrt(d / n));
  }
  return worst;
}

// Prefill of every case (all prompt rows) then three batched decode steps of the reference's
// greedy ids: every logits row in order.
Logits all_logits(const Fixture& fx, Backend& be) {
  ModelOptions o;
  o.max_context = 1024;
  o.max_sequences = static_cast<int32_t>(fx.cases.size());
  o.prefill_chunk = kPrefillChunk;
  o.weights = WeightPrecision::F32;
  auto lm = CausalLM::load(fx.checkpoint, be, o);
  Logits out;
  for (size_t i = 0; i < fx.cases.size(); ++i) {
    const auto l = lm->prefill(static_cast<int32_t>(i), fx.cases[i].prompt, LogitsFor::All);
    const auto split = fx.cases[i].prompt.size() < 2
                           ? l.begin()
                           : l.begin() + std::min<int64_t>(static_cast<int64_t>(l.size()), kPrefillChunk * fx.vocab);
    out.first_chunks.insert(out.first_chunks.end(), l.begin(), split);
    out.rest.insert(out.rest.end(), split, l.end());
  }
  for (size_t j = 0; j < 3; ++j) {
    std::vector<int32_t> slots, ids;
    for (size_t i = 0; i < fx.cases.size(); ++i)
      if (j < fx.cases[i].greedy.size()) {
        slots.push_back(static_cast<int32_t>(i));
        ids.push_back(fx.cases[i].greedy[j]);
      }
    const auto l = lm->decode(slots, ids);
    out.rest.insert(out.rest.end(), l.begin(), l.end());
  }
  return out;
}

} // namespace

TEST(UnfusedFallback, PluginWithoutTheFusedOpsGivesTheSameLogits) {
  PluginHost unfused_host;
  ASSERT_TRUE(unfused_host.load_file(NINFER_UNFUSED_PLUGIN_FILE)) << NINFER_UNFUSED_PLUGIN_FILE;
  const LoadedPlugin& unfused = *unfused_host.plugins().front();
  ASSERT_TRUE(unfused.variants_for(NINFER_OP_HEAD_NORM_ROPE).empty()) << "cpu-unfused must lack the fused ops";
  for (const char* op : {NINFER_OP_NORM_LINEAR, NINFER_OP_CONV_L2_NORM, NINFER_OP_GATED_DELTA_STEP})
    ASSERT_TRUE(unfused.variants_for(op).empty()) << "cpu-unfused must lack the fused op " << op;
  for (const char* name : {"tiny-qwen3", "tiny-qwen3_5"}) {
    const Fixture fx = Fixture::load(name);
    Backend fused_be = cpu_model_backend();
    Backend unfused_be(unfused, host_device());
    const ninfer_shape s{1, {128, 4, 2, 64}, NINFER_DTYPE_F32};
    ASSERT_TRUE(fused_be.has_variant(NINFER_OP_HEAD_NORM_ROPE, s));
    ASSERT_FALSE(unfused_be.has_variant(NINFER_OP_HEAD_NORM_ROPE, s));
    const ninfer_shape nl{1, {64, 128, 1, 0}, NINFER_DTYPE_F32};
    ASSERT_TRUE(fused_be.has_variant(NINFER_OP_NORM_LINEAR, nl));
    ASSERT_FALSE(unfused_be.has_variant(NINFER_OP_NORM_LINEAR, nl));
    const Logits fused = all_logits(fx, fused_be), unfused_logits = all_logits(fx, unfused_be);
    ASSERT_EQ(fused.first_chunks.size(), unfused_logits.first_chunks.size()) << name;
    ASSERT_EQ(fused.rest.size(), unfused_logits.rest.size()) << name;
    ASSERT_FALSE(fused.rest.empty()) << name;
    const size_t differ = bits_differ(fused.first_chunks, unfused_logits.first_chunks);
    EXPECT_EQ(differ, 0u) << name << ": " << differ << " of " << fused.first_chunks.size()
                          << " logits of the prompts' first chunks differ";
    const bool hybrid = std::string(name) == "tiny-qwen3_5";
    if (!hybrid) {
      EXPECT_EQ(bits_differ(fused.rest, unfused_logits.rest), 0u) << name << ": later logits differ";
    } else {
      const double rel = worst_row_rel_l2(fused.rest, unfused_logits.rest, static_cast<size_t>(fx.vocab));
      std::printf("%s later rows, fused vs unfused Gated DeltaNet step: worst logits row relative L2 %.3g "
                  "(tolerance gating-order-row-rel-l2 %.0e)\n",
                  name, rel, kGatingOrderRowRelL2);
      EXPECT_LE(rel, kGatingOrderRowRelL2) << name;
      EXPECT_GT(rel, 0.0) << name << ": the decode steps did not take the fused path";
    }
    // The unfused path ran the three ops: its backend planned rope and never the fused op.
    bool planned_rope = false;
    for (const Plan* p : unfused_be.cached_plans()) planned_rope |= p->op == "rope";
    EXPECT_TRUE(planned_rope) << name;
    for (const Plan* p : fused_be.cached_plans()) EXPECT_NE(p->op, "rope") << name << ": the fused path ran rope";
    // Likewise norm_linear: the fused path never needs silu_mul, the unfused one never plans it.
    bool planned_norm_linear = false;
    for (const Plan* p : fused_be.cached_plans()) {
      planned_norm_linear |= p->op == "norm_linear";
      EXPECT_NE(p->op, "silu_mul") << name << ": the fused path ran silu_mul";
    }
    EXPECT_TRUE(planned_norm_linear) << name;
    for (const Plan* p : unfused_be.cached_plans()) EXPECT_NE(p->op, "norm_linear") << name;
    // Qwen3.5's decode steps ran the fused Gated DeltaNet ops; the unfused backend has none.
    if (hybrid) {
      bool planned_step = false, planned_conv = false;
      for (const Plan* p : fused_be.cached_plans()) {
        planned_step |= p->op == NINFER_OP_GATED_DELTA_STEP;
        planned_conv |= p->op == NINFER_OP_CONV_L2_NORM;
      }
      EXPECT_TRUE(planned_step && planned_conv) << name;
    }
  }
}
