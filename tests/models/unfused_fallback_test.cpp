// Model code runs head_norm_rope (q/k norm + rotary embedding in one op) and norm_linear (a
// block's norm + first projection (+ SwiGLU)) only where the plugin has a variant for them; on a
// plugin without them (one written before the ops: here the CPU plugin built without them,
// cpu-unfused) the layers run the ops they fuse. On the CPU
// plugin both paths run the same row functions, so the logits must be the same bits, for Qwen3
// (q and k rows back to back: one rope call) and Qwen3.5 (gated q rows: a rope call each).
#include <gtest/gtest.h>

#include <cstring>

#include "model_test_env.hpp"
#include "ninfer/abi/ops/head_norm_rope.h"
#include "ninfer/abi/ops/norm_linear.h"

using namespace ninfer;
using namespace ninfer::test;

namespace {

// Prefill of every case (all prompt rows) then three batched decode steps of the reference's
// greedy ids: every logits row in order.
std::vector<float> all_logits(const Fixture& fx, Backend& be) {
  ModelOptions o;
  o.max_context = 1024;
  o.max_sequences = static_cast<int32_t>(fx.cases.size());
  o.prefill_chunk = 37; // prompts cross chunk edges
  o.weights = WeightPrecision::F32;
  auto lm = CausalLM::load(fx.checkpoint, be, o);
  std::vector<float> out;
  for (size_t i = 0; i < fx.cases.size(); ++i) {
    const auto l = lm->prefill(static_cast<int32_t>(i), fx.cases[i].prompt, LogitsFor::All);
    out.insert(out.end(), l.begin(), l.end());
  }
  for (size_t j = 0; j < 3; ++j) {
    std::vector<int32_t> slots, ids;
    for (size_t i = 0; i < fx.cases.size(); ++i)
      if (j < fx.cases[i].greedy.size()) {
        slots.push_back(static_cast<int32_t>(i));
        ids.push_back(fx.cases[i].greedy[j]);
      }
    const auto l = lm->decode(slots, ids);
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

} // namespace

TEST(UnfusedFallback, PluginWithoutHeadNormRopeGivesTheSameLogits) {
  PluginHost unfused_host;
  ASSERT_TRUE(unfused_host.load_file(NINFER_UNFUSED_PLUGIN_FILE)) << NINFER_UNFUSED_PLUGIN_FILE;
  const LoadedPlugin& unfused = *unfused_host.plugins().front();
  ASSERT_TRUE(unfused.variants_for(NINFER_OP_HEAD_NORM_ROPE).empty()) << "cpu-unfused must lack the fused ops";
  ASSERT_TRUE(unfused.variants_for(NINFER_OP_NORM_LINEAR).empty()) << "cpu-unfused must lack the fused ops";
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
    const auto fused = all_logits(fx, fused_be), unfused_logits = all_logits(fx, unfused_be);
    ASSERT_EQ(fused.size(), unfused_logits.size()) << name;
    size_t differ = 0;
    for (size_t i = 0; i < fused.size(); ++i) differ += std::memcmp(&fused[i], &unfused_logits[i], sizeof(float)) != 0;
    EXPECT_EQ(differ, 0u) << name << ": " << differ << " of " << fused.size() << " logits differ";
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
  }
}
