// The run-time compiled linear family without a GPU (CI): variant names and their parsing, the
// sweep, NVRTC compiles of every sweep point for sm_80 and sm_90, and the messages a bad name, a
// compile error or a device that cannot run them give (through schedule tables and backends too).
// Launching them is tested on the GPU (tests/gpu_generic/jit_linear_gpu_test.cpp).
#include <gtest/gtest.h>

#include <set>

#include "ninfer/abi/ops/linear.h"
#include "ninfer/arch_catalog.hpp"
#include "ninfer/device.hpp"
#include "ninfer/error.hpp"
#include "ninfer/jit/jit_variants.hpp"
#include "ninfer/jit/linear_gemv.hpp"
#include "ninfer/jit/nvrtc.hpp"
#include "nvrtc_test_env.hpp"
#include "ninfer/plugin_host.hpp"
#include "ninfer/runtime/backend.hpp"
#include "ninfer/schedule_table.hpp"
#include "test_support.hpp"

using namespace ninfer;
using namespace ninfer::jit;

namespace {

const LoadedPlugin& cpu_plugin() {
  const LoadedPlugin* p = test::build_plugins().find("cpu");
  if (!p) throw Error("the cpu plugin is not built");
  return *p;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string build_error(const LoadedPlugin& plugin, const ninfer_device_info& dev, const std::string& op,
                        const std::string& name) {
  try {
    jit_variant(plugin, dev, op, name);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST(JitGemvName, EveryValidParameterSetRoundTrips) {
  int n = 0;
  for (int t : {64, 128, 256, 512})
    for (int r : {1, 2, 4, 8})
      for (int v : {2, 4, 8})
        for (int m = 1; m <= kGemvMaxTokens; ++m) {
          const GemvParams p{t, r, v, m};
          const std::string name = gemv_name(p);
          std::string why;
          const auto back = parse_gemv_name(name, &why);
          ASSERT_TRUE(back) << name << ": " << why;
          EXPECT_EQ(*back, p) << name;
          EXPECT_TRUE(is_jit_variant_name(name));
          ++n;
        }
  EXPECT_EQ(n, 4 * 4 * 3 * 8);
  EXPECT_EQ(gemv_name({128, 4, 8, 1}), "jit_gemv_t128_r4_v8_m1");
}

TEST(JitGemvName, MalformedNamesAreRefusedWithTheNameAndTheReason) {
  const std::pair<const char*, const char*> bad[] = {
      {"jit_gemv_t128_r4_v8", "fields"},        // a field missing
      {"jit_gemv_t128_r4_v8_m1_x", "fields"},   // one too many
      {"jit_gemv_t128_r4_v8_m", "fields"},      // no value
      {"jit_gemv_t0128_r4_v8_m1", "fields"},    // leading zero: one name per parameter set
      {"jit_gemv_t+128_r4_v8_m1", "fields"},    // sign
      {"jit_gemv_r4_t128_v8_m1", "fields"},     // order
      {"jit_gemv_T128_r4_v8_m1", "fields"},     // case
      {"jit_gemv_t128_r4_v8_m1 ", "fields"},    // trailing space
      {"jit_gemv_t100_r4_v8_m1", "threads 100"}, // not whole warps / not offered
      {"jit_gemv_t2048_r4_v8_m1", "threads 2048"},
      {"jit_gemv_t128_r3_v8_m1", "rows per warp 3"},
      {"jit_gemv_t128_r4_v1_m1", "vector width 1"},
      {"jit_gemv_t128_r4_v16_m1", "vector width 16"},
      {"jit_gemv_t128_r4_v8_m9", "tokens per CTA 9"},
      {"jit_gemv_t128_r4_v8_m99999999999999999999", "fields"}, // overflows int
      {"gemv_mma_t1", "does not start with"},
  };
  for (const auto& [name, reason] : bad) {
    std::string why;
    EXPECT_FALSE(parse_gemv_name(name, &why)) << name;
    EXPECT_TRUE(contains(why, std::string("'") + name + "'")) << why;
    EXPECT_TRUE(contains(why, reason)) << name << ": " << why;
  }
}

TEST(JitGemvSweep, TwelvePointsPerDecodeBucketWithOneTileCoveringIt) {
  for (int64_t t = 1; t <= kGemvMaxTokens; ++t) {
    const auto grid = gemv_sweep(t);
    ASSERT_EQ(grid.size(), 12u) << t;
    std::set<std::string> names;
    for (const GemvParams& p : grid) {
      EXPECT_GE(p.tokens, t);
      EXPECT_LT(p.tokens, 2 * t) << "the smallest power of two >= the bucket";
      EXPECT_EQ(p.tokens & (p.tokens - 1), 0);
      std::string why;
      EXPECT_TRUE(parse_gemv_name(gemv_name(p), &why)) << why;
      names.insert(gemv_name(p));
    }
    EXPECT_EQ(names.size(), grid.size()) << "no duplicates";
    EXPECT_EQ(jit_sweep_names(NINFER_OP_LINEAR, t).size(), grid.size());
    for (const std::string& n : jit_sweep_names(NINFER_OP_LINEAR, t)) EXPECT_EQ(names.count(n), 1u) << n;
  }
  EXPECT_TRUE(gemv_sweep(0).empty());
  EXPECT_TRUE(gemv_sweep(kGemvMaxTokens + 1).empty());
  EXPECT_TRUE(jit_sweep_names(NINFER_OP_LINEAR, 64).empty());
  EXPECT_TRUE(jit_sweep_names("gdn_gating", 1).empty());
}

// Every point ninfer-tune can time compiles to machine code for the H200 (sm_90) and the oldest
// architecture the family is for (sm_80), and holds both dtype kernels under their lowered names.
TEST(JitGemvCompile, EverySweepPointCompilesForSm80AndSm90) {
  NINFER_REQUIRE_NVRTC();
  std::set<std::string> done;
  for (int64_t t = 1; t <= kGemvMaxTokens; ++t)
    for (const GemvParams& p : gemv_sweep(t)) {
      if (!done.insert(gemv_name(p)).second) continue;
      for (const auto& [major, minor] : {std::pair{9, 0}, std::pair{8, 0}}) {
        const CompileRequest r = gemv_request(p, major, minor);
        EXPECT_EQ(r.name, "linear/" + gemv_name(p));
        const CompiledKernel k = compile(r, nullptr);
        EXPECT_EQ(k.entry.kind, PayloadKind::Cubin) << gemv_name(p);
        EXPECT_EQ(k.arch, "sm_" + std::to_string(major * 10 + minor));
        EXPECT_EQ(k.entry.image.compare(0, 4, "\x7f" "ELF"), 0) << "a cubin is an ELF file";
        for (int32_t dtype : {NINFER_DTYPE_BF16, NINFER_DTYPE_F32}) {
          const std::string lowered = k.lowered_name(gemv_expression(p, dtype));
          EXPECT_EQ(lowered.rfind("_ZN10ninfer_jit", 0), 0u) << lowered;
          EXPECT_TRUE(contains(k.entry.image, lowered)) << lowered << " is not in the cubin";
        }
      }
    }
  EXPECT_EQ(done.size(), 4u * 12u); // m = 1, 2, 4, 8
}

TEST(JitGemvCompile, ACardNewerThanNvrtcKnowsGetsPtx) {
  NINFER_REQUIRE_NVRTC();
  const CompiledKernel k = compile(gemv_request({128, 4, 8, 1}, 99, 0), nullptr);
  EXPECT_EQ(k.entry.kind, PayloadKind::Ptx);
  EXPECT_TRUE(contains(k.entry.image, ".entry " + k.lowered_name(gemv_expression({128, 4, 8, 1}, NINFER_DTYPE_BF16))));
}

TEST(JitGemvCompile, ACompileErrorNamesTheVariantAndShowsNvrtcsLog) {
  NINFER_REQUIRE_NVRTC();
  CompileRequest r = gemv_request({256, 2, 4, 2}, 9, 0);
  r.source += "\nstatic_assert(sizeof(ninfer_jit::u32) == 3, \"jit_test_broken_marker\");\n";
  try {
    compile(r, nullptr);
    FAIL() << "expected a compile error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_TRUE(contains(m, "linear/jit_gemv_t256_r2_v4_m2")) << m;
    EXPECT_TRUE(contains(m, "jit_test_broken_marker")) << m;
    EXPECT_TRUE(contains(m, "sm_90")) << m;
  }
}

// Everything that can be refused before compiling is, with the name in the message.
TEST(JitVariants, RefusalsNameTheVariantAndSayWhy) {
  const LoadedPlugin& cpu = cpu_plugin();
  const ninfer_device_info host = host_device();
  EXPECT_TRUE(contains(build_error(cpu, host, NINFER_OP_LINEAR, "jit_gemv_t128_r4_v8_m1"), "CUDA devices only"));
  EXPECT_TRUE(contains(build_error(cpu, host, NINFER_OP_LINEAR, "jit_gemv_t128_r4_v8_m1"), "'jit_gemv_t128_r4_v8_m1'"));
  const std::string bad = build_error(cpu, host, NINFER_OP_LINEAR, "jit_gemv_t128_r4");
  EXPECT_TRUE(contains(bad, "'jit_gemv_t128_r4' is not a run-time compiled linear variant")) << bad;
  const std::string op = build_error(cpu, host, "gdn_gating", "jit_gemv_t128_r4_v8_m1");
  EXPECT_TRUE(contains(op, "op 'gdn_gating' has no run-time compiled variants")) << op;

  // A described card: no loaded kernel to read resources from.
  const ArchCatalog cat = ArchCatalog::load_default();
  const ninfer_device_info h200 = cat.describe(cat.require_device("H200"));
  for (const auto& p : test::build_plugins().plugins()) {
    if (!(p->abi->capabilities & NINFER_CAP_CUDA)) continue;
    const std::string m = build_error(*p, h200, NINFER_OP_LINEAR, "jit_gemv_t128_r4_v8_m1");
    EXPECT_TRUE(contains(m, "need the live device")) << m;
  }
  EXPECT_EQ(resolve_variant(cpu, host, NINFER_OP_LINEAR, "no_such_variant"), nullptr) << "not a jit_ name";
  EXPECT_NE(resolve_variant(cpu, host, NINFER_OP_LINEAR, cpu.variants_for(NINFER_OP_LINEAR).front()->name), nullptr);
}

// A schedule table naming JIT variants that cannot be built here drops those entries with the
// reason (and keeps the rest); the planner and run_variant report them the same way.
TEST(JitVariants, TablesAndBackendsReportUnbuildableNamesWithoutCrashing) {
  const LoadedPlugin& cpu = cpu_plugin();
  const ninfer_device_info host = host_device();
  const std::string good_cpu = cpu.variants_for(NINFER_OP_LINEAR).front()->name;
  ScheduleTable t;
  t.source = "jit-test.yaml";
  t.arch = cpu.arch();
  t.entries = {{NINFER_OP_LINEAR, 1, 1, "jit_gemv_t128_r4_v8_m1", std::nullopt, "jit-test.yaml:3"},
               {NINFER_OP_LINEAR, 2, 2, "jit_gemv_bogus", std::nullopt, "jit-test.yaml:4"},
               {NINFER_OP_LINEAR, 3, 8, good_cpu, std::nullopt, "jit-test.yaml:5"}};
  ScheduleTable unchecked = t;
  check_against(t, cpu, host);
  ASSERT_EQ(t.entries.size(), 1u);
  EXPECT_EQ(t.entries[0].variant, good_cpu);
  ASSERT_EQ(t.warnings.size(), 2u);
  EXPECT_TRUE(contains(t.warnings[0], "jit-test.yaml:3") && contains(t.warnings[0], "CUDA devices only")) << t.warnings[0];
  EXPECT_TRUE(contains(t.warnings[1], "'jit_gemv_bogus' is not a run-time compiled linear variant")) << t.warnings[1];

  // A table handed to a backend unchecked: the planner falls back to its own choice with a warning.
  Backend be(cpu, host, BackendOptions{"", 0, &unchecked, false});
  const ninfer_shape s{1, {64, 32, 0, 0}, NINFER_DTYPE_F32};
  const Plan& p = be.plan(NINFER_OP_LINEAR, s);
  EXPECT_FALSE(is_jit_variant_name(p.variant));
  ASSERT_FALSE(p.warnings.empty());
  EXPECT_TRUE(contains(p.warnings[0], "jit_gemv_t128_r4_v8_m1") && contains(p.warnings[0], "CUDA devices only"))
      << p.warnings[0];
  try {
    be.run_variant(NINFER_OP_LINEAR, "jit_gemv_t128_r4_v8_m1", s, nullptr);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "'jit_gemv_t128_r4_v8_m1'")) << e.what();
  }
}
