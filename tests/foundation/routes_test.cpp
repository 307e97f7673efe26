// One place decides a route: the planner. These tests use the CPU plugin (always built) on the
// host: a schedule table that names a variant nobody has fails its load at FILE:LINE; `unfused`
// (a table entry or NINFER_UNFUSED_OPS's list) routes a fused op to the core's unfused form;
// a fused op that takes one token per sequence is never planned onto a plugin variant for a
// call whose shape states more; a fused op the plugin lacks takes its unfused form.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "ninfer/abi/ops/argmax.h"
#include "ninfer/abi/ops/causal_conv1d.h"
#include "ninfer/abi/ops/conv_l2_norm.h"
#include "ninfer/abi/ops/gated_delta_rule.h"
#include "ninfer/abi/ops/gated_delta_step.h"
#include "ninfer/abi/ops/head_norm_rope_append_attention.h"
#include "ninfer/abi/ops/linear.h"
#include "ninfer/abi/ops/norm_linear.h"
#include "ninfer/abi/ops/sample.h"
#include "ninfer/devices/device.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/planning/op_catalog.hpp"
#include "ninfer/planning/planner.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/runtime/backend.hpp"
#include "ninfer/runtime/unfused_forms.hpp"
#include "ninfer/planning/schedule_table.hpp"
#include "described_cards.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace ninfer;
using namespace ninfer::test;

namespace {

const LoadedPlugin& cpu() {
  const LoadedPlugin* p = build_plugins().find("cpu");
  if (!p) throw std::runtime_error("no cpu plugin in the build");
  return *p;
}

// A table file for the CPU plugin with `entries` (YAML lines) from line 4 on.
fs::path cpu_table(const std::string& entries) {
  static int n = 0;
  const fs::path p =
      fs::temp_directory_path() / ("ninfer-routes-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".yaml");
  std::ofstream(p) << "format: ninfer-schedule/1\narch: cpu\nentries:\n" << entries;
  return p;
}

// The message check_against throws for the table, or "" when it loads.
std::string check_error(const fs::path& f) {
  ScheduleTable t = load_schedule_table(f, data_dir() / "schemas");
  try {
    check_against(t, cpu(), host_device());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The CPU plugin's first variant of `op`: the one its planner picks among equals.
std::string first_variant(const char* op) { return cpu().variants_for(op).front()->name; }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

ninfer_shape attention_step_shape(int64_t tokens, int32_t max_seq_tokens) {
  ninfer_shape s{tokens, {64, 4, 2, 256}, NINFER_DTYPE_F32, 0};
  s.max_seq_tokens = max_seq_tokens;
  return s;
}

} // namespace

TEST(Routes, TableNamingAVariantThePluginLacksFailsTheLoadAtItsLine) {
  const fs::path f = cpu_table("  - {op: linear, tokens: [1, 8], variant: " + first_variant(NINFER_OP_LINEAR) + "}\n"
                               "  - {op: linear, tokens: [9, 64], variant: no_such_variant}\n");
  const std::string m = check_error(f);
  EXPECT_TRUE(contains(m, f.string() + ":5")) << m;
  EXPECT_TRUE(contains(m, "no variant 'no_such_variant'")) << m;
  fs::remove(f);
}

TEST(Routes, TableNamingAnUnknownOpFailsTheLoadAtItsLine) {
  const fs::path f = cpu_table("  - {op: no_such_op, tokens: [1, 8], variant: any}\n");
  const std::string m = check_error(f);
  EXPECT_TRUE(contains(m, f.string() + ":4")) << m;
  EXPECT_TRUE(contains(m, "unknown op")) << m;
  fs::remove(f);
}

TEST(Routes, UnfusedIsARouteOfFusedOpsOnly) {
  const fs::path bad = cpu_table("  - {op: norm_linear, tokens: [1, 8], variant: unfused}\n"
                                 "  - {op: linear, tokens: [1, 8], variant: unfused}\n");
  const std::string m = check_error(bad);
  EXPECT_TRUE(contains(m, bad.string() + ":5")) << m;
  EXPECT_TRUE(contains(m, "not a fused op")) << m;
  fs::remove(bad);

  const fs::path good = cpu_table("  - {op: norm_linear, tokens: [1, 8], variant: unfused}\n");
  ScheduleTable t = load_schedule_table(good, data_dir() / "schemas");
  check_against(t, cpu(), host_device());
  EXPECT_TRUE(t.warnings.empty());
  ASSERT_EQ(t.entries.size(), 1u);
  fs::remove(good);

  // Every op the catalog calls fused has a form in the core, and no other op has one.
  for (const OpInfo& op : op_catalog()) EXPECT_EQ(op.unfused_form, unfused_form_implemented(op.name)) << op.name;
}

TEST(Routes, TableEntryNamingUnfusedRoutesTheFusedOpThere) {
  const fs::path f = cpu_table("  - {op: norm_linear, tokens: [1, 4], variant: unfused}\n"
                               "  - {op: norm_linear, tokens: [5, 8], variant: " +
                               first_variant(NINFER_OP_NORM_LINEAR) + "}\n");
  ScheduleTable t = load_schedule_table(f, data_dir() / "schemas");
  check_against(t, cpu(), host_device());
  Planner planner(cpu(), host_device(), &t, OpList());
  const ninfer_shape nl{3, {64, 128, 0, 0}, NINFER_DTYPE_F32, 0};
  const Plan p = planner.plan(NINFER_OP_NORM_LINEAR, nl);
  EXPECT_TRUE(p.unfused);
  EXPECT_EQ(p.variant, kUnfusedRoute);
  EXPECT_EQ(p.v, nullptr);
  EXPECT_TRUE(p.launches.empty());
  EXPECT_EQ(p.source, f.string() + ":4");
  ninfer_shape more = nl;
  more.tokens = 6;
  const Plan q = planner.plan(NINFER_OP_NORM_LINEAR, more);
  EXPECT_FALSE(q.unfused);
  EXPECT_EQ(q.variant, first_variant(NINFER_OP_NORM_LINEAR));
  EXPECT_EQ(q.source, f.string() + ":5");
  // An unfused route has no launch of its own: execute() refuses it rather than do nothing.
  EXPECT_THROW(execute(p, nullptr, nullptr, nullptr), Error);
  fs::remove(f);
}

TEST(Routes, OverrideListRoutesNamedFusedOpsUnfusedAndLeavesOthers) {
  Planner planner(cpu(), host_device(), nullptr, OpList("norm_linear@64x128,linear"));
  const ninfer_shape named{1, {64, 128, 0, 0}, NINFER_DTYPE_F32, 0};
  const ninfer_shape other{1, {64, 256, 0, 0}, NINFER_DTYPE_F32, 0};
  const Plan p = planner.plan(NINFER_OP_NORM_LINEAR, named);
  EXPECT_TRUE(p.unfused);
  EXPECT_EQ(p.source, "NINFER_UNFUSED_OPS");
  EXPECT_FALSE(planner.plan(NINFER_OP_NORM_LINEAR, other).unfused) << "only the calls of 64x128";
  // linear is no fused op: the list cannot take its variants away.
  EXPECT_FALSE(planner.plan(NINFER_OP_LINEAR, named).unfused);
  EXPECT_EQ(planner.plan(NINFER_OP_LINEAR, named).variant, first_variant(NINFER_OP_LINEAR));
}

// gated_delta_step walks a sequence's tokens: its variants take a verification pass's few tokens
// per sequence and refuse a prompt chunk, which then runs the unfused ops (the chunked rule).
TEST(Routes, GatedDeltaStepTakesVerificationPassesAndLeavesPromptsUnfused) {
  ASSERT_FALSE(require_op(NINFER_OP_GATED_DELTA_STEP).one_token_per_sequence);
  Planner planner(cpu(), host_device(), nullptr, OpList());
  for (int32_t seq_tokens : {0, 1, 2, 6, 8, 9, 64}) {
    ninfer_shape step{64, {4, 16, 16, 2}, NINFER_DTYPE_F32, 0};
    step.max_seq_tokens = seq_tokens;
    EXPECT_EQ(planner.plan(NINFER_OP_GATED_DELTA_STEP, step).unfused, seq_tokens > 8) << seq_tokens;
  }
}

TEST(Routes, OneTokenPerSequenceOpsTakeTheirVariantOnlyWhenTheShapeSaysSo) {
  ASSERT_TRUE(require_op(NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION).one_token_per_sequence);
  Planner planner(cpu(), host_device(), nullptr, OpList());
  for (int32_t seq_tokens : {0, 1, 2, 7}) {
    const Plan p = planner.plan(NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION, attention_step_shape(8, seq_tokens));
    EXPECT_EQ(p.unfused, seq_tokens > 1) << seq_tokens << " tokens of one sequence";
    if (p.unfused) {
      EXPECT_TRUE(contains(p.reason, "tokens of one sequence")) << p.reason;
    } else {
      EXPECT_EQ(p.variant, first_variant(NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION));
    }
  }
  // Naming the variant does not get round the contract.
  EXPECT_THROW(planner.plan_variant(*cpu().variants_for(NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION).front(),
                                    attention_step_shape(8, 2)),
               Error);
  // A table entry for the op's bucket does not apply to a call of several tokens per sequence;
  // it is passed over without a warning.
  const fs::path f = cpu_table("  - {op: head_norm_rope_append_attention, tokens: [1, 64], variant: " +
                               first_variant(NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION) + "}\n");
  ScheduleTable t = load_schedule_table(f, data_dir() / "schemas");
  check_against(t, cpu(), host_device());
  Planner with_table(cpu(), host_device(), &t, OpList());
  const Plan decode = with_table.plan(NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION, attention_step_shape(8, 1));
  EXPECT_EQ(decode.source, f.string() + ":4");
  const Plan prompt = with_table.plan(NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION, attention_step_shape(8, 8));
  EXPECT_TRUE(prompt.unfused);
  EXPECT_TRUE(prompt.warnings.empty()) << prompt.warnings.front();
  fs::remove(f);
}

TEST(Routes, FusedOpWithoutAPluginVariantForTheShapeTakesItsUnfusedForm) {
  Planner planner(cpu(), host_device(), nullptr, OpList());
  // The CPU norm_linear serves gated calls of an even width only.
  const Plan odd = planner.plan(NINFER_OP_NORM_LINEAR, {2, {64, 127, 1, 0}, NINFER_DTYPE_F32, 0});
  EXPECT_TRUE(odd.unfused);
  EXPECT_EQ(odd.source, "planner");
  EXPECT_TRUE(contains(odd.reason, "no variant for this shape")) << odd.reason;
  // An op that is not fused still fails to plan with no variant.
  EXPECT_THROW(planner.plan(NINFER_OP_LINEAR, {2, {64, 127, 0, 0}, 99, 0}), Error);
}

// A call that keeps every token's state (NINFER_SHAPE_TOKEN_STATES: a speculative round's
// verification pass, docs/speculative.md) plans only to variants that write them: on the CPU
// plugin the recurrent rule, on every CUDA plugin of the build (planned for each described card,
// no GPU needed) the recurrent rule, the tiled conv and the fused decode ops, which walk a pass's
// tokens. Without the flag the same shapes keep their usual routes.
TEST(Routes, TokenStatesGoOnlyToTheVariantsThatWriteThem) {
  auto flagged = [](ninfer_shape s) {
    s.flags = NINFER_SHAPE_TOKEN_STATES;
    return s;
  };
  const ninfer_shape rule{16, {4, 48, 128, 128}, NINFER_DTYPE_F32, 0};
  Planner on_cpu(cpu(), host_device(), nullptr, OpList());
  EXPECT_EQ(on_cpu.plan(NINFER_OP_GATED_DELTA_RULE, rule).variant, "chunked64");
  EXPECT_EQ(on_cpu.plan(NINFER_OP_GATED_DELTA_RULE, flagged(rule)).variant, "recurrent");
  for (const Card& card : cards_with_plugins()) {
    SCOPED_TRACE(card.dev.name);
    Planner planner(*card.plugin, card.dev, nullptr, OpList());
    EXPECT_NE(planner.plan(NINFER_OP_GATED_DELTA_RULE, rule).variant, "recurrent");
    EXPECT_EQ(planner.plan(NINFER_OP_GATED_DELTA_RULE, flagged(rule)).variant, "recurrent");
    const ninfer_shape conv{16, {10240, 4, 0, 0}, NINFER_DTYPE_F32, 0};
    EXPECT_EQ(planner.plan(NINFER_OP_CAUSAL_CONV1D, flagged(conv)).variant, "tiled");
    // The fused decode ops write token states themselves: a verification pass (4 tokens of
    // each sequence) keeps its fused route.
    ninfer_shape step{16, {48, 128, 128, 16}, NINFER_DTYPE_F32, 0};
    step.max_seq_tokens = 4;
    EXPECT_EQ(planner.plan(NINFER_OP_GATED_DELTA_STEP, flagged(step)).variant, "decode");
    const ninfer_shape conv_norm{16, {10240, 4, 4, 128}, NINFER_DTYPE_F32, 0};
    EXPECT_EQ(planner.plan(NINFER_OP_CONV_L2_NORM, flagged(conv_norm)).variant, "decode");
  }
}

// A model sizes its workspace by running its largest steps under a SizingScope, but a smaller
// call of the same op may take another route with a workspace of its own. On every described
// card, with its built-in table and with one that routes argmax's 1-16 rows to row_split (a
// workspace) and more to block_per_row (none), sizing the largest call of an op reserves what
// every smaller call of it plans.
TEST(Routes, SizingTheLargestCallCoversEverySmallerOne) {
  const auto cards = cards_with_plugins();
  if (cards.empty()) GTEST_SKIP() << "build has no CUDA plugins";
  auto split_below_17 = [](const std::string& arch) {
    ScheduleTable t;
    t.source = "split_below_17.yaml";
    t.arch = arch;
    t.entries.push_back({NINFER_OP_ARGMAX, 1, 16, "row_split", {}, "split_below_17.yaml:1", {}, {}});
    t.entries.push_back({NINFER_OP_ARGMAX, 17, 1 << 20, "block_per_row", {}, "split_below_17.yaml:2", {}, {}});
    return t;
  };
  struct Call {
    const char* op;
    ninfer_shape shape;
  };
  const std::vector<Call> calls{
      {NINFER_OP_ARGMAX, {64, {248320, 0, 0, 0}, NINFER_DTYPE_F32}},
      {NINFER_OP_SAMPLE, {64, {248320, 0, 0, 0}, NINFER_DTYPE_F32}},
      {NINFER_OP_LINEAR, {300, {5120, 17408, 128, 0}, NINFER_DTYPE_INT4}},
      {NINFER_OP_LINEAR, {300, {17408, 5120, 128, 0}, NINFER_DTYPE_INT8}},
      {NINFER_OP_LINEAR, {300, {5120, 6144, 128, 0}, NINFER_DTYPE_FP8_E4M3}},
      {NINFER_OP_LINEAR, {300, {4096, 151936, 0, 0}, NINFER_DTYPE_BF16}},
      {"causal_conv1d", {300, {10240, 4, 0, 0}, NINFER_DTYPE_F32}},
  };
  size_t routes_with_workspace = 0;
  for (const auto& c : cards)
    for (const bool own_table : {false, true})
    for (const Call& call : calls) {
      const ScheduleTable table = split_below_17(c.plugin->arch());
      BackendOptions bo;
      bo.plan_only = true; // sizes while "running"; nothing is allocated or launched
      if (own_table) bo.schedule = &table;
      Backend be(*c.plugin, c.dev, bo);
      be.run(call.op, call.shape, nullptr);
      const size_t reserved = be.workspace_bytes();
      for (int64_t t = 1; t <= call.shape.tokens; ++t) {
        ninfer_shape s = call.shape;
        s.tokens = t;
        const Plan& p = be.plan(call.op, s);
        routes_with_workspace += p.workspace_bytes > 0;
        EXPECT_LE(p.workspace_bytes, reserved) << c.dev.name << ": " << call.op << " " << ninfer_dtype_name(s.dtype)
                                               << " at " << t << " tokens on " << p.variant;
      }
      if (HasFailure()) return;
    }
  EXPECT_GT(routes_with_workspace, 0u) << "no call needs a workspace: the test checks nothing";
}
