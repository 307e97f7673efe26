#include <gtest/gtest.h>

#include <map>
#include <string>

#include "described_cards.hpp"
#include "ninfer/abi/ops/gdn_gating.h"
#include "ninfer/abi/ops/linear.h"
#include "ninfer/abi/ops/norm_linear.h"
#include "ninfer/devices/device.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/planning/op_catalog.hpp"
#include "ninfer/planning/planner.hpp"
#include "ninfer/planning/schedule_table.hpp"
#include "residency_oracle.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

ninfer_shape gating_shape(int64_t tokens, int32_t dtype, int64_t hidden = 5120, int64_t heads = 48) {
  ninfer_shape s{};
  s.tokens = tokens;
  s.dims[0] = hidden;
  s.dims[1] = heads;
  s.dtype = dtype;
  return s;
}

size_t dyn(const ninfer_variant& v, const ninfer_shape& s) { return v.dynamic_smem_bytes ? v.dynamic_smem_bytes(v.ctx, &s) : 0; }

// Residency of a variant for a shape by the independent rules.
int64_t oracle_residency(const ninfer_variant& v, const ninfer_shape& s, const ninfer_device_info& d) {
  return static_cast<int64_t>(oracle_blocks_per_sm(v.resources, static_cast<int64_t>(dyn(v, s)), d)) * d.sm_count;
}

// Every plan must cover [0, T) with contiguous launches whose grids match their token ranges,
// and no cooperative launch may exceed what can be resident.
void expect_legal(const Plan& p, const ninfer_device_info& d) {
  const int64_t T = p.shape.tokens;
  const int64_t resident = oracle_residency(*p.v, p.shape, d);
  ASSERT_EQ(p.blocks_per_sm * static_cast<int64_t>(d.sm_count), resident) << d.name << " " << p.variant;
  ASSERT_FALSE(p.launches.empty());
  int64_t next = 0;
  for (const auto& l : p.launches) {
    ASSERT_EQ(l.token_begin, next) << d.name << " " << p.variant << " T=" << T;
    ASSERT_GT(l.token_end, l.token_begin);
    ASSERT_EQ(l.grid_y, p.v->split_k);
    ASSERT_GE(static_cast<int64_t>(l.grid_x) * p.v->tokens_per_cta, p.v->cooperative ? l.token_end - l.token_begin : 1);
    if (p.cooperative) {
      ASSERT_EQ(l.grid_x, (l.token_end - l.token_begin + p.v->tokens_per_cta - 1) / p.v->tokens_per_cta);
      ASSERT_LE(l.ctas(), resident) << d.name << " " << p.variant << " T=" << T << ": cooperative launch of "
                                    << l.ctas() << " CTAs, only " << resident << " resident";
    }
    next = l.token_end;
  }
  ASSERT_EQ(next, T);
}

} // namespace

TEST(Planner, EveryPlanOnEveryKnownCardIsLegalForEveryTokenCount) {
  const auto cards = cards_with_plugins();
  if (cards.empty()) GTEST_SKIP() << "build has no CUDA plugins";
  EXPECT_EQ(cards.size(), catalog().devices().size()) << "a known card has no plugin for its architecture";
  int64_t plans = 0;
  for (const auto& c : cards) {
    ScheduleTable table = builtin_schedule_table(*c.plugin, c.dev);
    EXPECT_TRUE(table.warnings.empty()) << c.dev.name;
    Planner planner(*c.plugin, c.dev, &table);
    for (int32_t dtype : {NINFER_DTYPE_BF16, NINFER_DTYPE_F32}) {
      for (int64_t T = 1; T <= 8192; ++T) {
        const ninfer_shape s = gating_shape(T, dtype);
        expect_legal(planner.plan(NINFER_OP_GDN_GATING, s), c.dev);
        if (HasFatalFailure()) return;
        ++plans;
      }
    }
  }
  EXPECT_EQ(plans, static_cast<int64_t>(cards.size()) * 2 * 8192);
}

TEST(Planner, ForcedCooperativeVariantsAreSlicedNeverOversubscribed) {
  const auto cards = cards_with_plugins();
  if (cards.empty()) GTEST_SKIP() << "build has no CUDA plugins";
  for (const auto& c : cards) {
    Planner planner(*c.plugin, c.dev);
    for (const ninfer_variant* v : c.plugin->variants_for(NINFER_OP_GDN_GATING)) {
      for (int64_t T = 1; T <= 8192; T += (T < 512 ? 1 : 7)) {
        const ninfer_shape s = gating_shape(T, NINFER_DTYPE_BF16);
        if (v->supports && !v->supports(v->ctx, &s)) continue; // declined (per_head: long calls)
        expect_legal(planner.plan_variant(*v, s), c.dev);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST(Planner, Rtx4080SuperPromptsThatCrashedTheOriginalEngineAreLegal) {
  const LoadedPlugin* sm89 = plugin_for_arch("sm_89");
  if (!sm89) GTEST_SKIP() << "build has no sm_89 plugin";
  const ninfer_device_info d = catalog().describe(catalog().require_device("RTX 4080 SUPER"));
  const ninfer_variant* split2 = sm89->find_variant(NINFER_OP_GDN_GATING, "split2");
  ASSERT_NE(split2, nullptr);
  Planner planner(*sm89, d);
  for (int64_t T : {1665, 2048}) {
    const ninfer_shape s = gating_shape(T, NINFER_DTYPE_BF16);
    const int64_t resident = oracle_residency(*split2, s, d);
    // One split2 launch over the whole prompt, as the original engine issued it, would not fit.
    const int64_t naive = (T + split2->tokens_per_cta - 1) / split2->tokens_per_cta * 2;
    EXPECT_GT(naive, resident) << T;
    const Plan forced = planner.plan_variant(*split2, s);
    EXPECT_GT(forced.launches.size(), 1u) << T;
    expect_legal(forced, d);
    const Plan chosen = planner.plan(NINFER_OP_GDN_GATING, s);
    expect_legal(chosen, d);
  }
}

TEST(Planner, RouteBoundariesFollowResidencyOnEachCard) {
  // The planner's route: the cooperative variant with the most splits whose whole token range
  // fits one launch; past every such capacity, the ordinary variant (unsplit, or mma for the
  // prompts it accepts) with the most resident CTAs x tokens per CTA.
  const auto cards = cards_with_plugins();
  if (cards.empty()) GTEST_SKIP() << "build has no CUDA plugins";
  for (const auto& c : cards) {
    Planner planner(*c.plugin, c.dev); // no table: the planner's own routes
    std::map<int, int64_t> capacity;    // split -> max tokens in one launch
    for (const ninfer_variant* v : c.plugin->variants_for(NINFER_OP_GDN_GATING))
      if (v->cooperative)
        capacity[v->split_k] =
            oracle_residency(*v, gating_shape(1, NINFER_DTYPE_BF16), c.dev) / v->split_k * v->tokens_per_cta;
    auto expected_split = [&](int64_t T) { // 0: no cooperative launch fits
      int best = 0;
      for (auto [split, cap] : capacity)
        if (cap >= T && split > best) best = split;
      return best;
    };
    auto expected_ordinary = [&](const ninfer_shape& s) {
      const ninfer_variant* best = nullptr;
      int64_t best_tokens = 0;
      for (const ninfer_variant* v : c.plugin->variants_for(NINFER_OP_GDN_GATING)) {
        if (v->cooperative || (v->supports && !v->supports(v->ctx, &s))) continue;
        const int64_t tokens = oracle_residency(*v, s, c.dev) * v->tokens_per_cta;
        if (tokens > best_tokens) best = v, best_tokens = tokens;
      }
      return best ? std::string(best->name) : std::string("(none)");
    };
    for (auto [split, cap] : capacity) {
      for (int64_t T : {cap - 1, cap, cap + 1}) {
        if (T < 1) continue;
        const ninfer_shape s = gating_shape(T, NINFER_DTYPE_BF16);
        const Plan p = planner.plan(NINFER_OP_GDN_GATING, s);
        if (const int want = expected_split(T)) {
          EXPECT_TRUE(p.cooperative) << c.dev.name << " T=" << T << " boundary of split" << split;
          EXPECT_EQ(p.v->split_k, want) << c.dev.name << " T=" << T << " boundary of split" << split;
        } else {
          EXPECT_EQ(p.variant, expected_ordinary(s)) << c.dev.name << " T=" << T << " boundary of split" << split;
        }
        EXPECT_EQ(p.launches.size(), 1u) << c.dev.name << " T=" << T;
      }
    }
  }
}

TEST(Planner, RoutingChangesWithSmCount) {
  const LoadedPlugin* sm89 = plugin_for_arch("sm_89");
  if (!sm89) GTEST_SKIP() << "build has no sm_89 plugin";
  const ninfer_device_info small = catalog().describe(catalog().require_device("RTX 4080 SUPER"));
  const ninfer_device_info big = catalog().describe(catalog().require_device("RTX 4090"));
  const ninfer_variant* split8 = sm89->find_variant(NINFER_OP_GDN_GATING, "split8");
  const ninfer_shape s1 = gating_shape(1, NINFER_DTYPE_BF16);
  const int64_t cap_small = oracle_residency(*split8, s1, small) / 8 * split8->tokens_per_cta;
  const int64_t cap_big = oracle_residency(*split8, s1, big) / 8 * split8->tokens_per_cta;
  ASSERT_LT(cap_small, cap_big);
  // At the 4090's split8 capacity the 4090 still uses split8; the 80-SM card must not.
  Planner on_small(*sm89, small), on_big(*sm89, big);
  EXPECT_EQ(on_big.plan(NINFER_OP_GDN_GATING, gating_shape(cap_big, NINFER_DTYPE_BF16)).variant, "split8");
  EXPECT_NE(on_small.plan(NINFER_OP_GDN_GATING, gating_shape(cap_big, NINFER_DTYPE_BF16)).variant, "split8");
}

TEST(Planner, OrdinaryLaunchesGetWaveBalancedGrids) {
  const auto cards = cards_with_plugins();
  if (cards.empty()) GTEST_SKIP() << "build has no CUDA plugins";
  for (const auto& c : cards) {
    const ninfer_variant* unsplit = c.plugin->find_variant(NINFER_OP_GDN_GATING, "unsplit");
    Planner planner(*c.plugin, c.dev);
    for (int64_t T : {8191, 8192, 100000}) {
      const ninfer_shape s = gating_shape(T, NINFER_DTYPE_BF16);
      const Plan p = planner.plan_variant(*unsplit, s);
      const int64_t resident = oracle_residency(*unsplit, s, c.dev);
      const int64_t tiles = (T + unsplit->tokens_per_cta - 1) / unsplit->tokens_per_cta;
      ASSERT_EQ(p.launches.size(), 1u);
      const int64_t grid = p.launches[0].grid_x;
      const int64_t waves = (tiles + resident - 1) / resident;
      EXPECT_LE(grid, std::max(resident, int64_t{1}) * 1) << c.dev.name;
      // Every CTA gets the same number of tiles (the last one maybe fewer), in `waves` rounds.
      EXPECT_EQ((tiles + grid - 1) / grid, waves) << c.dev.name << " T=" << T;
    }
  }
}

TEST(Planner, VariantThatCannotFitIsSkippedAndNamedWhenForced) {
  // float32 inputs with a hidden size whose staged x tile exceeds sm_89's opt-in shared
  // memory: split2 cannot run there, and the planner must route around it.
  const LoadedPlugin* sm89 = plugin_for_arch("sm_89");
  if (!sm89) GTEST_SKIP() << "build has no sm_89 plugin";
  const ninfer_device_info d = catalog().describe(catalog().require_device("RTX 4090"));
  const ninfer_shape s = gating_shape(700, NINFER_DTYPE_F32, 16384, 64);
  const ninfer_variant* split2 = sm89->find_variant(NINFER_OP_GDN_GATING, "split2");
  ASSERT_EQ(oracle_residency(*split2, s, d), 0);
  Planner planner(*sm89, d);
  EXPECT_NE(planner.plan(NINFER_OP_GDN_GATING, s).variant, "split2");
  try {
    planner.plan_variant(*split2, s);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gdn_gating/split2 cannot run on RTX 4090"), std::string::npos) << e.what();
  }
}

TEST(Planner, HostVariantIsOneLaunch) {
  const LoadedPlugin* cpu = build_plugins().find("cpu");
  Planner planner(*cpu, host_device());
  const Plan p = planner.plan(NINFER_OP_GDN_GATING, gating_shape(37, NINFER_DTYPE_F32, 64, 4));
  EXPECT_TRUE(p.host);
  ASSERT_EQ(p.launches.size(), 1u);
  EXPECT_EQ(p.launches[0].token_end, 37);
}

// Every op every CUDA plugin registers, on every described card of that plugin's
// architecture: whatever the planner picks for the op's real-model shape is legal by the
// independent residency rules, for token counts from 1 to 8192 (each CUDA plugin is checked
// from its own compiled kernel resources). An op the plugin cannot plan for a shape is fine
// only when no variant supports that shape at all.
TEST(Planner, EveryRegisteredOpPlansLegallyOnEveryCardOfItsArchitecture) {
  const auto cards = cards_with_plugins();
  if (cards.empty()) GTEST_SKIP() << "build has no CUDA plugins";
  std::vector<int64_t> token_counts;
  for (int64_t t = 1; t <= 8192; t = t < 80 ? t + 1 : t * 5 / 4) token_counts.push_back(t);
  token_counts.push_back(8192);
  std::map<std::string, int64_t> plans; // per op, over all cards
  for (const auto& c : cards) {
    Planner planner(*c.plugin, c.dev);
    for (const std::string& op_name : c.plugin->ops()) {
      plans[op_name] += 0;
      const OpInfo& op = require_op(op_name);
      for (int64_t T : token_counts) {
        ninfer_shape s{T, {op.default_dims[0], op.default_dims[1], op.default_dims[2], op.default_dims[3]},
                       op.default_dtype};
        bool any_supports = false;
        for (const ninfer_variant* v : c.plugin->variants_for(op_name))
          any_supports |= (v->dtype_mask & (1u << s.dtype)) && (!v->supports || v->supports(v->ctx, &s));
        if (!any_supports) continue;
        const Plan p = planner.plan(op_name, s);
        expect_legal(p, c.dev);
        if (HasFatalFailure()) {
          ADD_FAILURE() << op_name << " on " << c.dev.name << " T=" << T;
          return;
        }
        ++plans[op_name];
      }
    }
  }
  // The op's real-model shape must be plannable for some token count: otherwise this test
  // would check nothing for it.
  for (const auto& [op, n] : plans) EXPECT_GT(n, 0) << op << ": no token count was plannable";
}

// linear with each architecture's built-in schedule table on every described card: whatever
// bucket picks a library variant (cuBLASLt), the plan is one launch over the whole token range
// with the workspace the variant asked for; every other plan is legal as above. Without a
// table the planner never picks a library variant (it cannot size one).
TEST(Planner, LibraryVariantsAreOneLaunchOverTheWholeRange) {
  const auto cards = cards_with_plugins();
  if (cards.empty()) GTEST_SKIP() << "build has no CUDA plugins";
  const OpInfo& op = require_op(NINFER_OP_LINEAR);
  int64_t library_plans = 0;
  for (const auto& c : cards) {
    ScheduleTable table = builtin_schedule_table(*c.plugin, c.dev);
    EXPECT_TRUE(table.warnings.empty()) << c.dev.name;
    Planner with_table(*c.plugin, c.dev, &table), own(*c.plugin, c.dev);
    for (int32_t dtype : {NINFER_DTYPE_BF16, NINFER_DTYPE_F32})
      for (int64_t T = 1; T <= 8192; T = T < 64 ? T + 1 : T * 3 / 2) {
        const ninfer_shape s{T, {op.default_dims[0], op.default_dims[1], 0, 0}, dtype};
        const Plan p = with_table.plan(NINFER_OP_LINEAR, s);
        expect_legal(p, c.dev);
        if (HasFatalFailure()) return;
        EXPECT_TRUE(p.warnings.empty()) << c.dev.name << " T=" << T << ": " << p.warnings.front();
        EXPECT_EQ(p.library, p.v->geometry == NINFER_GEOMETRY_LIBRARY);
        if (p.library) {
          ++library_plans;
          ASSERT_EQ(p.launches.size(), 1u);
          EXPECT_EQ(p.launches[0].token_begin, 0);
          EXPECT_EQ(p.launches[0].token_end, T);
          EXPECT_EQ(p.workspace_bytes, p.v->workspace_bytes ? p.v->workspace_bytes(p.v->ctx, &s, T) : 0u);
          EXPECT_NE(p.source, "planner") << "only a schedule table picks a library variant";
        }
        EXPECT_FALSE(own.plan(NINFER_OP_LINEAR, s).library) << c.dev.name << " T=" << T;
      }
  }
#ifdef NINFER_TEST_HAVE_CUDA
  EXPECT_GT(library_plans, 0) << "no card's table routes linear to a library variant";
#endif
}

// Decode's linear on the H200 (arch/schedules/sm_90.yaml, from the table, for both weight dtypes
// and every Qwen3-8B and Qwen3.5-27B projection): one token runs gemv_4warps (measured faster
// than cuBLASLt inside the decode step) as one ordinary launch of 256-thread CTAs, four outputs
// each, and the 8B's o_proj, down_proj and LM head its twin gemv_4warps_early_loads (faster on
// the 8B, slower on the 27B's shapes); two and more tokens run cuBLASLt as one library launch
// per call.
TEST(Planner, DecodeLinearOnTheH200RunsTheSplitGemvForOneTokenAndCublasLtForMore) {
  const LoadedPlugin* plugin = plugin_for_arch("sm_90");
  if (!plugin) GTEST_SKIP() << "build has no sm_90 plugin";
  const ninfer_device_info h200 = catalog().describe(catalog().require_device("H200"));
  ScheduleTable table = builtin_schedule_table(*plugin, h200);
  ASSERT_TRUE(table.warnings.empty()) << table.warnings.front();
  Planner planner(*plugin, h200, &table);
  struct Shape {
    int64_t K, N;
  };
  for (int32_t dtype : {NINFER_DTYPE_BF16, NINFER_DTYPE_F32})
    for (Shape sh : {Shape{4096, 6144}, Shape{4096, 4096}, Shape{4096, 24576}, Shape{12288, 4096}, Shape{4096, 151936},
                     Shape{6144, 5120}, Shape{17408, 5120}, Shape{5120, 248320}})
      for (int64_t tokens : {1, 2, 8}) {
        const bool qwen3_8b_shape = (sh.K == 4096 && (sh.N == 4096 || sh.N == 151936)) || (sh.K == 12288 && sh.N == 4096);
        const ninfer_shape s{tokens, {sh.K, sh.N, 0, 0}, dtype};
        const Plan p = planner.plan(NINFER_OP_LINEAR, s);
        const std::string what = "K=" + std::to_string(sh.K) + " N=" + std::to_string(sh.N) + " dtype " +
                                 std::to_string(dtype) + " T=" + std::to_string(tokens);
        EXPECT_EQ(p.variant, tokens > 1 ? "cublaslt" : qwen3_8b_shape ? "gemv_4warps_early_loads" : "gemv_4warps") << what;
        EXPECT_NE(p.source.find("sm_90.yaml:"), std::string::npos) << p.source;
        EXPECT_EQ(p.library, tokens > 1) << what;
        EXPECT_FALSE(p.cooperative);
        ASSERT_EQ(p.launches.size(), 1u);
        EXPECT_EQ(p.launches[0].token_begin, 0);
        EXPECT_EQ(p.launches[0].token_end, tokens);
        if (tokens == 1) {
          EXPECT_EQ(p.launches[0].block, 256) << what;
        }
      }
}

// causal_conv1d with each architecture's built-in table on every described card: decode sizes
// (up to 64 tokens) plan to "tiled", prompts to "rows" (arch/schedules/*.yaml,
// docs/cuda-gated-deltanet.md), each from its table entry and legal, for Qwen3.5-27B's conv
// (10,240 channels, kernel 4). A 4096-token 27B prompt is one launch of one CTA per 32-token
// tile and 512-channel block: 128 x 20.
TEST(Planner, CausalConv1dPromptsRunRowsAndDecodeStaysOnTiled) {
  const auto cards = cards_with_plugins();
  if (cards.empty()) GTEST_SKIP() << "build has no CUDA plugins";
  for (const auto& c : cards) {
    ScheduleTable table = builtin_schedule_table(*c.plugin, c.dev);
    ASSERT_TRUE(table.warnings.empty()) << c.dev.name << ": " << table.warnings.front();
    Planner planner(*c.plugin, c.dev, &table);
    for (int64_t T : {1, 2, 8, 64, 65, 100, 512, 4096, 65536}) {
      const Plan p = planner.plan("causal_conv1d", {T, {10240, 4, 0, 0}, NINFER_DTYPE_F32});
      EXPECT_EQ(p.variant, T <= 64 ? "tiled" : "rows") << c.dev.name << " T=" << T;
      EXPECT_NE(p.source.find(c.plugin->arch() + ".yaml:"), std::string::npos) << c.dev.name << " T=" << T << ": "
                                                                               << p.source;
      EXPECT_TRUE(p.warnings.empty()) << c.dev.name << " T=" << T << ": " << p.warnings.front();
      expect_legal(p, c.dev);
      if (HasFatalFailure()) return;
      if (T == 4096) {
        ASSERT_EQ(p.launches.size(), 1u);
        EXPECT_EQ(p.launches[0].grid_x, 128) << c.dev.name;
        EXPECT_EQ(p.launches[0].grid_y, 20) << c.dev.name;
      }
    }
  }
}

// A quantized call is never routed to a float variant, with the plugin's own route or with its
// built-in table (whose decode entries name float variants too): it goes to a variant that takes
// the dtype and the shape, or, in a plugin without one, fails with an error naming the op, the
// dtype and the plugin; groups of 128 columns and a g_idx mapping (dims[2] 0, which
// gemv_quant_mma does not take) alike, without a warning about the entries that do not apply.
// norm_linear has no quantized CUDA variant: it takes its unfused form.
TEST(Planner, QuantizedWeightsAreNeverRoutedToFloatVariants) {
  const auto cards = cards_with_plugins();
  if (cards.empty()) GTEST_SKIP() << "build has no CUDA plugins";
  for (const auto& c : cards) {
    ScheduleTable table = builtin_schedule_table(*c.plugin, c.dev);
    Planner own(*c.plugin, c.dev), with_table(*c.plugin, c.dev, &table);
    for (int32_t dtype : {NINFER_DTYPE_INT4, NINFER_DTYPE_INT8, NINFER_DTYPE_FP8_E4M3})
      for (int64_t group : {128, 0})
        for (int64_t T : {1, 2, 3, 5, 8, 512})
          for (const Planner* p : {&own, &with_table}) {
            const ninfer_shape s{T, {4096, 4096, group, 0}, dtype};
            bool taken = false;
            for (const ninfer_variant* v : c.plugin->variants_for(NINFER_OP_LINEAR)) taken |= (v->dtype_mask >> dtype) & 1u;
            try {
              const Plan plan = p->plan(NINFER_OP_LINEAR, s);
              EXPECT_TRUE(taken && ((plan.v->dtype_mask >> dtype) & 1u))
                  << c.dev.name << ": " << ninfer_dtype_name(dtype) << " routed to " << plan.variant;
              // The table's float entries do not apply to a quantized call: no warning about them.
              EXPECT_TRUE(plan.warnings.empty()) << c.dev.name << " group " << group << " T=" << T << ": " << plan.warnings.front();
            } catch (const Error& e) {
              const std::string msg = e.what();
              EXPECT_FALSE(taken) << c.dev.name << ": " << ninfer_dtype_name(dtype) << " T=" << T << ": " << msg;
              EXPECT_NE(msg.find("linear"), std::string::npos) << msg;
              EXPECT_NE(msg.find(ninfer_dtype_name(dtype)), std::string::npos) << msg;
              EXPECT_NE(msg.find(c.plugin->name()), std::string::npos) << msg;
            }
            EXPECT_TRUE(p->plan(NINFER_OP_NORM_LINEAR, s).unfused) << c.dev.name;
          }
  }
}
