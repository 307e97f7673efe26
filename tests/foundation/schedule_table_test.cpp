#include <gtest/gtest.h>

#include <filesystem>
#include <fmt/format.h>

#include <fstream>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "described_cards.hpp"
#include "ninfer/abi/ops/gdn_gating.h"
#include "ninfer/abi/ops/linear.h"
#include "ninfer/abi/ops/norm_linear.h"
#include "ninfer/support/error.hpp"
#include "ninfer/planning/occupancy.hpp"
#include "ninfer/planning/op_catalog.hpp"
#include "ninfer/planning/planner.hpp"
#include "ninfer/planning/schedule_table.hpp"

namespace fs = std::filesystem;
using namespace ninfer;
using namespace ninfer::test;

namespace {

fs::path write_table(const std::string& text) {
  static int n = 0;
  const fs::path p = fs::temp_directory_path() / ("ninfer-sched-" + std::to_string(::getpid()) + "-" +
                                                  std::to_string(n++) + ".yaml");
  std::ofstream(p) << text;
  return p;
}

std::string load_error(const std::string& text) {
  const fs::path p = write_table(text);
  try {
    load_schedule_table(p, data_dir() / "schemas");
  } catch (const Error& e) {
    fs::remove(p);
    return e.what();
  }
  fs::remove(p);
  return "";
}

struct Sm90 {
  const LoadedPlugin* plugin = plugin_for_arch("sm_90");
  ninfer_device_info dev = catalog().describe(catalog().require_device("H200"));
};

} // namespace

TEST(ScheduleTable, BuiltInTablesLoadAndAreLegalOnTheirCards) {
  for (const auto& card : catalog().devices()) {
    const LoadedPlugin* p = plugin_for_arch(card.arch);
    if (!p) continue;
    const ScheduleTable t = builtin_schedule_table(*p, catalog().describe(card));
    EXPECT_EQ(t.arch, card.arch);
    EXPECT_FALSE(t.entries.empty()) << card.name;
    EXPECT_TRUE(t.warnings.empty()) << card.name << ": " << (t.warnings.empty() ? "" : t.warnings.front());
  }
}

// A block's first projection on more than one token (a decode batch, a mixed step's chunk) with
// bf16 weights: on every described card, the norm fused into cuBLASLt's bf16 input from the
// token count where the card's linear leaves the GEMVs for cuBLASLt up to 256 tokens (below it,
// and beyond, and for float32 weights, the core's rms_norm + linear).
TEST(ScheduleTable, ShippedTablesFuseTheNormOfBf16BatchesWhereTheLinearIsCublasLt) {
  int cards = 0;
  for (const auto& card : catalog().devices()) {
    const LoadedPlugin* p = plugin_for_arch(card.arch);
    if (!p) continue;
    ++cards;
    const ninfer_device_info dev = catalog().describe(card);
    const ScheduleTable t = builtin_schedule_table(*p, dev);
    const Planner planner(*p, dev, &t);
    for (int64_t tokens : {2, 8, 9, 17, 64, 256, 257, 2048}) {
      const ninfer_shape linear{tokens, {4096, 24576, 0, 0}, NINFER_DTYPE_BF16};
      const bool lt = planner.plan(NINFER_OP_LINEAR, linear).variant == "cublaslt";
      const ninfer_shape nl{tokens, {4096, 24576, 1, 0}, NINFER_DTYPE_BF16};
      const Plan bf16 = planner.plan(NINFER_OP_NORM_LINEAR, nl);
      EXPECT_EQ(bf16.variant, lt && tokens <= 256 ? "cublaslt" : kUnfusedRoute) << card.name << ", " << tokens;
      const Plan f32 = planner.plan(NINFER_OP_NORM_LINEAR, {tokens, {4096, 24576, 1, 0}, NINFER_DTYPE_F32});
      EXPECT_TRUE(f32.unfused) << card.name << ", " << tokens << ": " << f32.variant;
    }
  }
  if (cards == 0) GTEST_SKIP() << "build has no plugin for a described card";
}

// Every table shipped in arch/schedules passes the schema and is named after its architecture.
// cuda-generic's (compute_80) is reached by no described card (that plugin registers only on a
// live GPU), so it is checked here: it carries sm_90's linear routes for whole token buckets
// (without them every linear takes the fma_tile kernels, 13-20x slower on the H200), and every
// variant it names exists in the sm_90 plugin, which compiles the same kernel sources. sm_90's
// per-matrix entries (dims ranges) are left out of the comparison: the one there now,
// gemv_4warps_early_loads, differs from gemv_4warps only under programmatic launch, which
// cuda-generic never uses.
TEST(ScheduleTable, EveryShippedTableLoadsAndCudaGenericCarriesTheSm90LinearRoutes) {
  std::map<std::string, ScheduleTable> tables;
  for (const auto& f : fs::directory_iterator(data_dir() / "arch" / "schedules")) {
    if (f.path().extension() != ".yaml") continue;
    ScheduleTable t = load_schedule_table(f.path(), data_dir() / "schemas"); // throws on a schema error
    EXPECT_EQ(t.arch, f.path().stem().string()) << f.path();
    EXPECT_FALSE(t.entries.empty()) << f.path();
    tables.emplace(f.path().stem().string(), std::move(t));
  }
  for (const char* arch : {"sm_89", "sm_90", "sm_120a", "compute_80"})
    ASSERT_TRUE(tables.count(arch)) << "arch/schedules/" << arch << ".yaml is missing";
  using Route = std::tuple<int64_t, int64_t, std::string>;
  auto linear_routes = [](const ScheduleTable& t) {
    std::vector<Route> r;
    for (const ScheduleEntry& e : t.entries)
      if (e.op == NINFER_OP_LINEAR && e.dims.empty())
        r.emplace_back(e.tokens_min, e.tokens_max, e.variant + (e.dtypes.empty() ? "" : " (quantized)"));
    return r;
  };
  EXPECT_FALSE(linear_routes(tables.at("sm_90")).empty());
  EXPECT_EQ(linear_routes(tables.at("compute_80")), linear_routes(tables.at("sm_90")));
  Sm90 s;
  if (!s.plugin) GTEST_SKIP() << "build has no sm_90 plugin to look the compute_80 variants up in";
  for (const ScheduleEntry& e : tables.at("compute_80").entries)
    EXPECT_NE(s.plugin->find_variant(e.op, e.variant), nullptr) << e.where << ": no variant " << e.op << "/" << e.variant;
}

TEST(ScheduleTable, EntryBeyondResidencyIsRejectedByName) {
  Sm90 s;
  if (!s.plugin) GTEST_SKIP() << "build has no sm_90 plugin";
  const ninfer_variant* split4 = s.plugin->find_variant(NINFER_OP_GDN_GATING, "split4");
  const int64_t resident = occupancy(split4->resources, 0, s.dev).residency;
  const fs::path f = write_table(fmt::format(
      "format: ninfer-schedule/1\narch: sm_90\nentries:\n"
      "  - {{op: gdn_gating, tokens: [1, 100], variant: split4, max_ctas: {}}}\n"
      "  - {{op: gdn_gating, tokens: [201, 4000], variant: split4, max_ctas: {}}}\n",
      resident + 1, resident / 2));
  ScheduleTable t = load_schedule_table(f, data_dir() / "schemas");
  check_against(t, *s.plugin, s.dev);
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_NE(t.warnings[0].find(f.string() + ":4"), std::string::npos) << t.warnings[0];
  EXPECT_NE(t.warnings[0].find("exceeds"), std::string::npos) << t.warnings[0];
  ASSERT_EQ(t.entries.size(), 1u);

  // The surviving entry is used for its bucket, capped at its max_ctas; the rejected bucket
  // falls back to the planner.
  Planner planner(*s.plugin, s.dev, &t);
  ninfer_shape shape{};
  shape.tokens = 3000;
  shape.dims[0] = 5120;
  shape.dims[1] = 48;
  shape.dtype = NINFER_DTYPE_BF16;
  const Plan p = planner.plan(NINFER_OP_GDN_GATING, shape);
  EXPECT_EQ(p.variant, "split4");
  EXPECT_EQ(p.source, f.string() + ":5");
  for (const auto& l : p.launches) EXPECT_LE(l.ctas(), resident / 2);
  shape.tokens = 50;
  EXPECT_EQ(planner.plan(NINFER_OP_GDN_GATING, shape).source, "planner");
  fs::remove(f);
}

// A variant the plugin does not have, or an op nobody knows, is a mistake in the table: the
// load fails naming the entry's line.
TEST(ScheduleTable, UnknownVariantOrOpFailsTheLoadAtItsLine) {
  Sm90 s;
  if (!s.plugin) GTEST_SKIP() << "build has no sm_90 plugin";
  for (const auto& [entry, why] : {std::pair<std::string, std::string>{"{op: gdn_gating, tokens: [1, 8], variant: split9}",
                                                                       "no variant 'split9'"},
                                   {"{op: no_such_op, tokens: [1, 5], variant: split4}", "unknown op"}}) {
    const fs::path f = write_table("format: ninfer-schedule/1\narch: sm_90\nentries:\n"
                                   "  - {op: gdn_gating, tokens: [9, 16], variant: split4}\n  - " + entry + "\n");
    ScheduleTable t = load_schedule_table(f, data_dir() / "schemas");
    try {
      check_against(t, *s.plugin, s.dev);
      ADD_FAILURE() << entry << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(f.string() + ":5"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
    fs::remove(f);
  }
}

// dims ranges split one token bucket by matrix: the first entry that covers the call's shape
// wins, and save_schedule_table writes the ranges back as they were read.
TEST(ScheduleTable, DimsRangesRouteTheMatricesOfOneBucketApart) {
  Sm90 s;
  if (!s.plugin) GTEST_SKIP() << "build has no sm_90 plugin";
  const fs::path f = write_table("format: ninfer-schedule/1\narch: sm_90\nentries:\n"
                                 "  - {op: linear, tokens: [1, 1], dims: [[8192, 65536]], variant: gemv_4warps_one_wave}\n"
                                 "  - {op: linear, tokens: [1, 1], dims: [[1, 8191], [100000, 1000000]], "
                                 "variant: gemv_4warps_one_wave}\n"
                                 "  - {op: linear, tokens: [1, 1], variant: gemv_4warps}\n");
  ScheduleTable t = load_schedule_table(f, data_dir() / "schemas");
  check_against(t, *s.plugin, s.dev);
  ASSERT_TRUE(t.warnings.empty()) << t.warnings.front();
  ASSERT_EQ(t.entries.size(), 3u);
  Planner planner(*s.plugin, s.dev, &t);
  struct Case {
    int64_t in, out;
    const char* variant;
    int line;
  };
  for (const Case& c : {Case{12288, 4096, "gemv_4warps_one_wave", 4}, Case{4096, 4096, "gemv_4warps", 6},
                        Case{4096, 151936, "gemv_4warps_one_wave", 5}, Case{65544, 4096, "gemv_4warps", 6},
                        Case{8184, 4096, "gemv_4warps", 6}}) {
    const ninfer_shape shape{1, {c.in, c.out, 0, 0}, NINFER_DTYPE_BF16};
    const Plan p = planner.plan(NINFER_OP_LINEAR, shape);
    EXPECT_EQ(p.variant, c.variant) << c.in << " x " << c.out;
    EXPECT_EQ(p.source, f.string() + ":" + std::to_string(c.line)) << c.in << " x " << c.out;
  }
  const fs::path saved = write_table("");
  save_schedule_table(t, saved);
  const ScheduleTable back = load_schedule_table(saved, data_dir() / "schemas");
  ASSERT_EQ(back.entries.size(), t.entries.size());
  for (size_t i = 0; i < t.entries.size(); ++i) EXPECT_EQ(back.entries[i].dims, t.entries[i].dims) << i;
  fs::remove(f);
  fs::remove(saved);
}

// `dtypes` routes the weight dtypes it names, in the same token bucket as an entry for every
// dtype: quantized linears take their variant, float ones go on to the next entry; the key
// survives a save and load.
TEST(ScheduleTable, DtypesRouteQuantizedLinearsApart) {
  Sm90 s;
  if (!s.plugin) GTEST_SKIP() << "build has no sm_90 plugin";
  const fs::path f = write_table("format: ninfer-schedule/1\narch: sm_90\nentries:\n"
                                 "  - {op: linear, tokens: [1, 8], dtypes: [int4, fp8_e4m3], variant: gemv_quant_warp_t8}\n"
                                 "  - {op: linear, tokens: [1, 8], dtypes: [int8], variant: gemv_quant_warp_t1}\n"
                                 "  - {op: linear, tokens: [1, 8], variant: gemv_4warps}\n");
  ScheduleTable t = load_schedule_table(f, data_dir() / "schemas");
  check_against(t, *s.plugin, s.dev);
  ASSERT_TRUE(t.warnings.empty()) << t.warnings.front();
  ASSERT_EQ(t.entries.size(), 3u);
  EXPECT_NE(t.entries[0].describe_bucket().find("dtypes int4,fp8_e4m3"), std::string::npos)
      << t.entries[0].describe_bucket();
  Planner planner(*s.plugin, s.dev, &t);
  struct Case {
    int32_t dtype;
    int64_t tokens;
    const char* variant;
    int line;
  };
  for (const Case& c : {Case{NINFER_DTYPE_INT4, 5, "gemv_quant_warp_t8", 4}, Case{NINFER_DTYPE_FP8_E4M3, 6, "gemv_quant_warp_t8", 4},
                        Case{NINFER_DTYPE_INT8, 1, "gemv_quant_warp_t1", 5}, Case{NINFER_DTYPE_BF16, 1, "gemv_4warps", 6}}) {
    const ninfer_shape shape{c.tokens, {4096, 4096, 128, 0}, c.dtype};
    const Plan p = planner.plan(NINFER_OP_LINEAR, shape);
    EXPECT_EQ(p.variant, c.variant) << ninfer_dtype_name(c.dtype);
    EXPECT_EQ(p.source, f.string() + ":" + std::to_string(c.line)) << ninfer_dtype_name(c.dtype);
  }
  const fs::path saved = write_table("");
  save_schedule_table(t, saved);
  const ScheduleTable back = load_schedule_table(saved, data_dir() / "schemas");
  ASSERT_EQ(back.entries.size(), t.entries.size());
  for (size_t i = 0; i < t.entries.size(); ++i) EXPECT_EQ(back.entries[i].dtypes, t.entries[i].dtypes) << i;
  // Without a dtypes key, an entry whose variant does not take the call's dtype lets the next
  // entry of the bucket serve it.
  const fs::path g = write_table("format: ninfer-schedule/1\narch: sm_90\nentries:\n"
                                 "  - {op: linear, tokens: [1, 8], variant: gemv_4warps}\n"
                                 "  - {op: linear, tokens: [1, 8], variant: gemv_quant_warp_t8}\n");
  ScheduleTable untyped = load_schedule_table(g, data_dir() / "schemas");
  check_against(untyped, *s.plugin, s.dev);
  const Plan q = Planner(*s.plugin, s.dev, &untyped).plan(NINFER_OP_LINEAR, {6, {4096, 4096, 128, 0}, NINFER_DTYPE_INT4});
  EXPECT_EQ(q.variant, "gemv_quant_warp_t8");
  EXPECT_EQ(q.source, g.string() + ":5");
  fs::remove(g);
  EXPECT_NE(load_error("format: ninfer-schedule/1\narch: sm_90\nentries:\n"
                       "  - {op: linear, tokens: [1, 2], dtypes: [int3], variant: a}\n")
                .find("entries[0].dtypes"),
            std::string::npos);
  fs::remove(f);
  fs::remove(saved);
}

TEST(ScheduleTable, TableForAnotherArchitectureIsRefused) {
  Sm90 s;
  if (!s.plugin) GTEST_SKIP() << "build has no sm_90 plugin";
  const fs::path f = write_table("format: ninfer-schedule/1\narch: sm_89\nentries:\n"
                                 "  - {op: gdn_gating, tokens: [1, 8], variant: split8}\n");
  ScheduleTable t = load_schedule_table(f, data_dir() / "schemas");
  check_against(t, *s.plugin, s.dev);
  EXPECT_TRUE(t.entries.empty());
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_NE(t.warnings[0].find("table is for sm_89"), std::string::npos);
  fs::remove(f);
}

TEST(ScheduleTable, MalformedTablesNameLineAndKey) {
  EXPECT_NE(load_error("format: ninfer-schedule/1\narch: sm_90\nentries:\n  - {op: x, tokens: [1, 2]\n")
                .find("YAML syntax error"),
            std::string::npos);
  std::string m = load_error("format: ninfer-schedule/1\narch: sm_90\nentries:\n"
                             "  - op: gdn_gating\n    tokens: [1, many]\n    variant: split8\n");
  EXPECT_NE(m.find(".yaml:5"), std::string::npos) << m;
  EXPECT_NE(m.find("entries[0].tokens"), std::string::npos) << m;
  m = load_error("format: ninfer-schedule/1\narch: sm_90\nentries:\n  - {op: gdn_gating, tokens: [1, 2]}\n");
  EXPECT_NE(m.find("entries[0]"), std::string::npos) << m;
  m = load_error("format: ninfer-schedule/1\narch: sm_90\nentries:\n  - {op: gdn_gating, tokens: [9, 2], variant: a}\n");
  EXPECT_NE(m.find("bucket [9, 2] is empty"), std::string::npos) << m;
  m = load_error("format: ninfer-schedule/1\narch: sm_90\nentries:\n"
                 "  - {op: linear, tokens: [1, 2], dims: [[1, 9], [9, 2]], variant: a}\n");
  EXPECT_NE(m.find("dims[1]: range [9, 2] is empty"), std::string::npos) << m;
  m = load_error("format: ninfer-schedule/1\narch: sm_90\nentries:\n"
                 "  - {op: linear, tokens: [1, 2], dims: [[4096]], variant: a}\n");
  EXPECT_NE(m.find("entries[0].dims"), std::string::npos) << m;
  m = load_error("format: ninfer-schedule/2\narch: sm_90\n");
  EXPECT_NE(m.find("format"), std::string::npos) << m;
}
