// Fused ops (head_norm_rope*, norm_linear (a block's norm + first projection (+ SwiGLU)),
// conv_l2_norm, gated_delta_step (a Gated DeltaNet decode step)) run as one op where the planner
// routes them to a plugin variant, and as the core's unfused form (the ops they fuse) where the
// plugin has none (one written before the ops: here the CPU plugin built without them,
// cpu-unfused), or where a schedule table entry or NINFER_UNFUSED_OPS names `unfused`. On the
// CPU plugin both routes run the same row functions, so the logits must be the same bits, for
// Qwen3 (q and k rows back to back: one rope call) and Qwen3.5 (gated q rows: a rope call each)
// — with one exception, Qwen3.5's calls of at most 8 tokens per sequence (decode steps, a
// one-token prompt; the fixture's other prompts and chunks are longer): there the fused
// gated_delta_step takes the gating's a and b from the layer's input projection (float32 sums,
// blocked) instead of gdn_gating's own (double sums). So for Qwen3.5 the rows of each longer
// prompt's first chunk must be the same bits and every later row is held to a tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "model_test_env.hpp"
#include "ninfer/abi/ops/conv_l2_norm.h"
#include "ninfer/abi/ops/gated_delta_step.h"
#include "ninfer/abi/ops/head_norm_rope.h"
#include "ninfer/abi/ops/head_norm_rope_append.h"
#include "ninfer/abi/ops/head_norm_rope_append_attention.h"
#include "ninfer/abi/ops/norm_linear.h"
#include "ninfer/planning/op_catalog.hpp"
#include "ninfer/planning/schedule_table.hpp"

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
    const auto l = decode_logits(*lm, slots, ids);
    out.rest.insert(out.rest.end(), l.begin(), l.end());
  }
  return out;
}

// The fused route's logits against the unfused one's (the comparison the header describes).
void expect_same_logits(const Logits& fused, const Logits& unfused, const Fixture& fx) {
  const std::string& name = fx.name;
  ASSERT_EQ(fused.first_chunks.size(), unfused.first_chunks.size()) << name;
  ASSERT_EQ(fused.rest.size(), unfused.rest.size()) << name;
  ASSERT_FALSE(fused.rest.empty()) << name;
  const size_t differ = bits_differ(fused.first_chunks, unfused.first_chunks);
  EXPECT_EQ(differ, 0u) << name << ": " << differ << " of " << fused.first_chunks.size()
                        << " logits of the prompts' first chunks differ";
  if (name != "tiny-qwen3_5") {
    EXPECT_EQ(bits_differ(fused.rest, unfused.rest), 0u) << name << ": later logits differ";
    return;
  }
  const double rel = worst_row_rel_l2(fused.rest, unfused.rest, static_cast<size_t>(fx.vocab));
  std::printf("%s later rows, fused vs unfused Gated DeltaNet step: worst logits row relative L2 %.3g "
              "(tolerance gating-order-row-rel-l2 %.0e)\n",
              name.c_str(), rel, kGatingOrderRowRelL2);
  EXPECT_LE(rel, kGatingOrderRowRelL2) << name;
  EXPECT_GT(rel, 0.0) << name << ": the decode steps did not take the fused gated_delta_step";
}

bool is_fused_op(const std::string& op) {
  const OpInfo* info = find_op(op);
  return info && info->unfused_form;
}

// Every fused op the model ran on `be` took its unfused route (from `source`, when given), and
// the ops they fuse ran: rope, silu_mul, gdn_gating, gated_delta_rule.
void expect_every_fused_op_unfused(const Backend& be, const std::string& name, const std::string& source = "") {
  std::vector<std::string> planned;
  for (const Plan* p : be.cached_plans()) {
    planned.push_back(p->op);
    if (!is_fused_op(p->op)) continue;
    EXPECT_TRUE(p->unfused) << name << ": " << p->op << " ran " << p->variant;
    if (!source.empty()) EXPECT_EQ(p->source, source) << name << ": " << p->op << " (" << p->reason << ")";
  }
  auto ran = [&](const char* op) { return std::find(planned.begin(), planned.end(), op) != planned.end(); };
  for (const char* op : {NINFER_OP_NORM_LINEAR, NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION, "rope", "silu_mul"})
    EXPECT_TRUE(ran(op)) << name << " never planned " << op;
  if (name == "tiny-qwen3_5")
    for (const char* op : {NINFER_OP_GATED_DELTA_STEP, NINFER_OP_CONV_L2_NORM, "gdn_gating", "gated_delta_rule"})
      EXPECT_TRUE(ran(op)) << name << " never planned " << op;
}

// The fused route ran its plugin variants: no rope or silu_mul at all, and Qwen3.5's decode steps
// ran gated_delta_step and conv_l2_norm on the plugin (prompt chunks of several tokens per
// sequence take head_norm_rope_append_attention's unfused form, and gated_delta_step's past the
// 8 tokens of one sequence the CPU variant walks).
void expect_fused_plugin_routes(const Backend& be, const std::string& name) {
  bool planned_norm_linear = false, planned_step = false, planned_conv = false;
  for (const Plan* p : be.cached_plans()) {
    EXPECT_NE(p->op, "rope") << name << ": the fused path ran rope";
    EXPECT_NE(p->op, "silu_mul") << name << ": the fused path ran silu_mul";
    planned_norm_linear |= p->op == NINFER_OP_NORM_LINEAR && !p->unfused;
    planned_step |= p->op == NINFER_OP_GATED_DELTA_STEP && !p->unfused;
    planned_conv |= p->op == NINFER_OP_CONV_L2_NORM && !p->unfused;
    if (p->op == NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION)
      EXPECT_EQ(p->unfused, p->shape.max_seq_tokens > 1) << name << ": " << p->op;
    else if (p->op == NINFER_OP_GATED_DELTA_STEP)
      EXPECT_EQ(p->unfused, p->shape.max_seq_tokens > 8) << name << ": " << p->op;
    else if (is_fused_op(p->op)) EXPECT_FALSE(p->unfused) << name << ": " << p->op;
  }
  EXPECT_TRUE(planned_norm_linear) << name;
  if (name == "tiny-qwen3_5") EXPECT_TRUE(planned_step && planned_conv) << name;
}

// A schedule table for the CPU plugin routing every fused op, every token count, to `unfused`.
std::filesystem::path unfused_table() {
  const auto f = std::filesystem::temp_directory_path() /
                 ("ninfer-unfused-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream out(f);
  out << "format: ninfer-schedule/1\narch: cpu\nentries:\n";
  for (const OpInfo& op : op_catalog())
    if (op.unfused_form) out << "  - {op: " << op.name << ", tokens: [1, 1048576], variant: unfused}\n";
  return f;
}

} // namespace

TEST(UnfusedFallback, PluginWithoutTheFusedOpsGivesTheSameLogits) {
  PluginHost unfused_host;
  ASSERT_TRUE(unfused_host.load_file(NINFER_UNFUSED_PLUGIN_FILE)) << NINFER_UNFUSED_PLUGIN_FILE;
  const LoadedPlugin& unfused = *unfused_host.plugins().front();
  for (const OpInfo& op : op_catalog())
    if (op.unfused_form) ASSERT_TRUE(unfused.variants_for(op.name).empty()) << "cpu-unfused must lack " << op.name;
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
    expect_same_logits(fused, unfused_logits, fx);
    expect_fused_plugin_routes(fused_be, name);
    // The planner's own choice for a plugin without the ops: their unfused forms.
    expect_every_fused_op_unfused(unfused_be, name, "planner");
  }
}

// A schedule table entry naming `unfused` routes the fused ops of the CPU plugin, which has them
// all, to their components; the logits are those of the fused route.
TEST(UnfusedFallback, TableNamingUnfusedGivesTheSameLogits) {
  const auto file = unfused_table();
  const LoadedPlugin& cpu = *model_test_plugins().find("cpu");
  ScheduleTable table = load_schedule_table(file, test::data_dir() / "schemas");
  check_against(table, cpu, host_device());
  ASSERT_TRUE(table.warnings.empty()) << table.warnings.front();
  for (const char* name : {"tiny-qwen3", "tiny-qwen3_5"}) {
    const Fixture fx = Fixture::load(name);
    Backend fused_be = cpu_model_backend();
    Backend table_be(cpu, host_device(), BackendOptions{"", 0, &table, false});
    const Logits fused = all_logits(fx, fused_be), unfused_logits = all_logits(fx, table_be);
    expect_same_logits(fused, unfused_logits, fx);
    for (const Plan* p : table_be.cached_plans())
      if (is_fused_op(p->op)) EXPECT_NE(p->source.find(file.string() + ":"), std::string::npos) << p->source;
    expect_every_fused_op_unfused(table_be, name);
  }
  std::filesystem::remove(file);
}

// NINFER_UNFUSED_OPS is a route override the planner applies: the same result as the table.
TEST(UnfusedFallback, EnvironmentOverrideGivesTheSameLogits) {
  std::string list;
  for (const OpInfo& op : op_catalog())
    if (op.unfused_form) list += (list.empty() ? "" : ",") + op.name;
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  Backend fused_be = cpu_model_backend();
  ::setenv("NINFER_UNFUSED_OPS", list.c_str(), 1);
  Backend override_be = cpu_model_backend(); // its planner reads the list when it is made
  ::unsetenv("NINFER_UNFUSED_OPS");
  const Logits fused = all_logits(fx, fused_be), unfused_logits = all_logits(fx, override_be);
  expect_same_logits(fused, unfused_logits, fx);
  expect_every_fused_op_unfused(override_be, fx.name, "NINFER_UNFUSED_OPS");
}
