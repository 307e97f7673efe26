// The CUDA plugins' run-time compiled linear family without a GPU (CI): variant names and their
// parsing, the sweep, NVRTC compiles of every sweep point for sm_80 and sm_90, and the messages a
// bad name, a compile error or a device that cannot run them give (through the plugins'
// make_variant, schedule tables and backends).
// Launching them is tested on the GPU (tests/gpu_generic/jit_linear_gpu_test.cpp).
#include <gtest/gtest.h>

#include <set>

#include "ninfer/abi/ops/linear.h"
#include "ninfer/devices/arch_catalog.hpp"
#include "ninfer/devices/device.hpp"
#include "ninfer/support/error.hpp"
#include "gemv_family.hpp"
#include "ninfer/jit/nvrtc.hpp"
#include "nvrtc_test_env.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/runtime/backend.hpp"
#include "ninfer/planning/schedule_table.hpp"
#include "test_support.hpp"

using namespace ninfer;
using namespace ninfer::jit;
using namespace ninfer::cuda_plugin::jit;

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
    if (!plugin.resolve_variant(dev, op, name)) return "(unknown name)";
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The built CUDA plugins (cuda-generic, a fallback, is left out: it registers only for a live GPU).
std::vector<const LoadedPlugin*> cuda_plugins() {
  std::vector<const LoadedPlugin*> out;
  for (const auto& p : test::build_plugins().plugins())
    if ((p->abi->capabilities & NINFER_CAP_CUDA) && !p->fallback()) out.push_back(p.get());
  return out;
}

// The NVRTC request of one parameter set, as the plugins hand it to the core's compiler.
CompileRequest gemv_request(const GemvParams& p, int major, int minor) {
  CompileRequest r;
  r.name = "linear/" + gemv_name(p);
  r.source = gemv_program_source(p);
  r.cc_major = major;
  r.cc_minor = minor;
  return r;
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
          EXPECT_TRUE(is_gemv_name(name));
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
    for (const LoadedPlugin* p : cuda_plugins()) { // what ninfer-tune gets through the plugin ABI
      const std::vector<std::string> offered = p->sweep_variant_names(NINFER_OP_LINEAR, t);
      EXPECT_EQ(offered.size(), grid.size()) << p->name();
      for (const std::string& n : offered) EXPECT_EQ(names.count(n), 1u) << n;
    }
  }
  EXPECT_TRUE(gemv_sweep(0).empty());
  EXPECT_TRUE(gemv_sweep(kGemvMaxTokens + 1).empty());
  for (const LoadedPlugin* p : cuda_plugins()) {
    EXPECT_TRUE(p->sweep_variant_names(NINFER_OP_LINEAR, 64).empty());
    EXPECT_TRUE(p->sweep_variant_names("gdn_gating", 1).empty());
  }
  EXPECT_TRUE(test::build_plugins().find("cpu")->sweep_variant_names(NINFER_OP_LINEAR, 1).empty());
}

// Every point ninfer-tune can time compiles to machine code for the H200 (sm_90) and the oldest
// architecture the family is for (sm_80), and holds both dtype kernels under their entry names.
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
        for (bool bf16 : {true, false})
          EXPECT_TRUE(contains(k.entry.image, gemv_kernel_name(bf16))) << gemv_kernel_name(bf16) << " is not in the cubin";
      }
    }
  EXPECT_EQ(done.size(), 4u * 12u); // m = 1, 2, 4, 8
}

TEST(JitGemvCompile, ACardNewerThanNvrtcKnowsGetsPtx) {
  NINFER_REQUIRE_NVRTC();
  const CompiledKernel k = compile(gemv_request({128, 4, 8, 1}, 99, 0), nullptr);
  EXPECT_EQ(k.entry.kind, PayloadKind::Ptx);
  EXPECT_TRUE(contains(k.entry.image, std::string(".entry ") + gemv_kernel_name(true)));
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

// Everything that can be refused before compiling is, with the name in the message: names that
// are no variant come back unknown (with the reason where the name looks like the family's), and
// a variant that cannot be made for the device throws with the plugin's reason.
TEST(JitVariants, RefusalsNameTheVariantAndSayWhy) {
  const LoadedPlugin& cpu = cpu_plugin();
  const ninfer_device_info host = host_device();
  EXPECT_EQ(cpu.resolve_variant(host, NINFER_OP_LINEAR, "jit_gemv_t128_r4_v8_m1"), nullptr)
      << "the CPU plugin makes no variants";
  EXPECT_NE(cpu.resolve_variant(host, NINFER_OP_LINEAR, cpu.variants_for(NINFER_OP_LINEAR).front()->name), nullptr);
  if (cuda_plugins().empty()) GTEST_SKIP() << "no CUDA plugin in this build";

  const ArchCatalog cat = ArchCatalog::load_default();
  const ninfer_device_info h200 = cat.describe(cat.require_device("H200"));
  for (const LoadedPlugin* p : cuda_plugins()) {
    const std::string on_host = build_error(*p, host, NINFER_OP_LINEAR, "jit_gemv_t128_r4_v8_m1");
    EXPECT_TRUE(contains(on_host, "CUDA devices only")) << on_host;
    EXPECT_TRUE(contains(on_host, "linear/jit_gemv_t128_r4_v8_m1") && contains(on_host, p->name())) << on_host;
    // A described card: no loaded kernel to read resources from.
    const std::string described = build_error(*p, h200, NINFER_OP_LINEAR, "jit_gemv_t128_r4_v8_m1");
    EXPECT_TRUE(contains(described, "need the live device")) << described;

    std::string why;
    EXPECT_EQ(p->resolve_variant(h200, NINFER_OP_LINEAR, "jit_gemv_t128_r4", &why), nullptr);
    EXPECT_TRUE(contains(why, "'jit_gemv_t128_r4' is not a run-time compiled linear variant")) << why;
    why.clear();
    EXPECT_EQ(p->resolve_variant(h200, "gdn_gating", "jit_gemv_t128_r4_v8_m1", &why), nullptr);
    EXPECT_TRUE(contains(why, "op 'gdn_gating' has no run-time compiled variants")) << why;
    why = "unchanged";
    EXPECT_EQ(p->resolve_variant(h200, NINFER_OP_LINEAR, "no_such_variant", &why), nullptr);
    EXPECT_EQ(why, "") << "a name outside every family has no reason to give";
  }
}

// A schedule table naming a JIT variant that cannot be made here drops that entry with the
// reason (and keeps the rest), and the planner reports it the same way; a name that is no
// variant at all fails the load at its line, with the plugin's reason.
TEST(JitVariants, TablesAndPlannersReportUnbuildableNamesWithoutCrashing) {
  if (cuda_plugins().empty()) GTEST_SKIP() << "no CUDA plugin in this build";
  const LoadedPlugin& plugin = *cuda_plugins().front();
  const ArchCatalog cat = ArchCatalog::load_default();
  const ninfer_device_info card = cat.describe(cat.require_device("H200"));
  const std::string good = plugin.variants_for(NINFER_OP_LINEAR).front()->name;
  ScheduleTable t;
  t.source = "jit-test.yaml";
  t.arch = plugin.arch();
  t.entries = {{NINFER_OP_LINEAR, 1, 1, "jit_gemv_t128_r4_v8_m1", std::nullopt, "jit-test.yaml:3"},
               {NINFER_OP_LINEAR, 3, 8, good, std::nullopt, "jit-test.yaml:5"}};
  ScheduleTable unchecked = t;
  check_against(t, plugin, card);
  ASSERT_EQ(t.entries.size(), 1u);
  EXPECT_EQ(t.entries[0].variant, good);
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_TRUE(contains(t.warnings[0], "jit-test.yaml:3") && contains(t.warnings[0], "need the live device"))
      << t.warnings[0];

  ScheduleTable bogus = unchecked;
  bogus.entries.push_back({NINFER_OP_LINEAR, 2, 2, "jit_gemv_bogus", std::nullopt, "jit-test.yaml:4"});
  try {
    check_against(bogus, plugin, card);
    FAIL() << "a name that is no variant must fail the load";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "jit-test.yaml:4")) << e.what();
    EXPECT_TRUE(contains(e.what(), "'jit_gemv_bogus' is not a run-time compiled linear variant")) << e.what();
  }

  // A table handed to a planner unchecked: the planner falls back to its own choice with a warning.
  const Planner planner(plugin, card, &unchecked);
  const ninfer_shape s{1, {4096, 4096, 0, 0}, NINFER_DTYPE_BF16};
  const Plan p = planner.plan(NINFER_OP_LINEAR, s);
  EXPECT_FALSE(is_gemv_name(p.variant));
  ASSERT_FALSE(p.warnings.empty());
  EXPECT_TRUE(contains(p.warnings[0], "jit_gemv_t128_r4_v8_m1") && contains(p.warnings[0], "need the live device"))
      << p.warnings[0];
}
