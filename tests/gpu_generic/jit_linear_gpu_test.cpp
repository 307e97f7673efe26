// The run-time compiled linear family (jit_gemv_*) on the live GPU, through the same paths
// ninfer-tune and the engine use: Backend::run_variant builds each variant from its name (NVRTC
// or the kernel cache), every point of the tune sweep (m = 1, 2, 4, 8) runs at T = 1..8 on random
// inputs against a float64 oracle, the variant's resources are the loaded function's (and the
// planner's residency the driver's), a schedule table naming JIT variants is honoured (a tuned
// table in the cache included, as an engine start reads it), and a CUDA-graph recording of a JIT
// launch replays correctly.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <optional>
#include <random>
#include <set>
#include <span>

#include "ninfer/abi/ops/linear.h"
#include "ninfer/devices/device.hpp"
#include "ninfer/support/error.hpp"
#include "gemv_family.hpp"
#include "ninfer/jit/nvrtc.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/runtime/backend.hpp"
#include "ninfer/planning/schedule_table.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace ninfer;
using namespace ninfer::jit;
using namespace ninfer::cuda_plugin::jit;

namespace {

struct Live {
  std::optional<ninfer_device_info> dev;
  const LoadedPlugin* plugin = nullptr;
  std::string why;
};

const Live& live() {
  static const Live l = [] {
    Live r;
    const Discovery d = discover_devices();
    if (d.cuda.empty()) {
      r.why = "no CUDA device (" + d.note + ")";
      return r;
    }
    const PluginChoice c = test::build_plugins().choose(d.cuda.front(), test::forced_test_plugin());
    if (!c.chosen) {
      r.why = "no plugin for " + std::string(d.cuda.front().name);
      return r;
    }
    r.dev = d.cuda.front();
    r.plugin = c.chosen;
    return r;
  }();
  return l;
}

#define REQUIRE_LIVE_GPU()                            \
  do {                                                \
    if (!live().dev) GTEST_SKIP() << live().why;      \
  } while (0)

// One linear problem on the host, its device copies, and the float64 oracle of y = x . W^T (or,
// after start_from_y0, of y = y0 + x . W^T: the accumulate flag).
struct Problem {
  int64_t K, N, x_stride, y_stride, T;
  int32_t dtype;
  std::vector<float> x;          // T x x_stride
  std::vector<uint16_t> w_bf16;  // N x K
  std::vector<float> w_f32;      // N x K
  std::vector<float> y0;         // (T + 1) x y_stride, y before an accumulating launch; empty: none
  DeviceBuffer dx, dw, dy;

  Problem(Backend& be, std::mt19937_64& rng, int64_t K_, int64_t N_, int32_t dtype_, int64_t T_, int64_t pad)
      : K(K_), N(N_), x_stride(K_ + pad), y_stride(N_ + pad), T(T_), dtype(dtype_) {
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    x.resize(static_cast<size_t>(T * x_stride));
    for (float& v : x) v = u(rng);
    w_f32.resize(static_cast<size_t>(N * K));
    w_bf16.resize(w_f32.size());
    for (size_t i = 0; i < w_f32.size(); ++i) {
      w_bf16[i] = test::to_bf16(u(rng) * 0.05f);
      w_f32[i] = dtype == NINFER_DTYPE_BF16 ? test::from_bf16(w_bf16[i]) : u(rng) * 0.05f;
    }
    dx = be.allocate(x.size() * 4, MemoryUse::Workspace, "jit test x");
    be.upload(dx, 0, x.data(), x.size() * 4);
    const size_t wb = static_cast<size_t>(N * K) * (dtype == NINFER_DTYPE_BF16 ? 2 : 4);
    dw = be.allocate(wb, MemoryUse::Workspace, "jit test w");
    be.upload(dw, 0, dtype == NINFER_DTYPE_BF16 ? static_cast<const void*>(w_bf16.data()) : w_f32.data(), wb);
    dy = be.allocate(static_cast<size_t>((T + 1) * y_stride) * 4, MemoryUse::Workspace, "jit test y");
  }

  ninfer_shape shape() const { return {T, {K, N, 0, 0}, dtype}; }
  ninfer_linear_args args(int32_t accumulate = 0) const {
    return {dx.as<float>(), x_stride, dw.data(), dy.as<float>(), y_stride, T, static_cast<int32_t>(K),
            static_cast<int32_t>(N), dtype, accumulate};
  }
  void poison(Backend& be) { // NaN everywhere: an output the kernel skips fails the check
    y0.clear();
    const std::vector<uint8_t> ff(dy.bytes(), 0xFF);
    be.upload(dy, 0, ff.data(), ff.size());
  }
  // Random y0 in y[0..T) x [0..N), NaN elsewhere (so stray writes still show), for a launch with
  // accumulate = 1; check() then expects y0 + x . W^T.
  void start_from_y0(Backend& be, std::mt19937_64& rng) {
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    y0.assign(static_cast<size_t>((T + 1) * y_stride), std::nanf(""));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = 0; n < N; ++n) y0[static_cast<size_t>(t * y_stride + n)] = u(rng);
    be.upload(dy, 0, y0.data(), y0.size() * 4);
  }
  // The worst |got - want| / (sum_k |x w| + tiny) over the T rows, and whether anything outside
  // y[0..T) x [0..N) was written (padding columns and the row after the last stay NaN).
  std::pair<double, bool> check(Backend& be) const {
    std::vector<float> y(static_cast<size_t>((T + 1) * y_stride));
    be.synchronize();
    be.download(dy, 0, y.data(), y.size() * 4);
    double worst = 0;
    bool stray = false;
    for (int64_t t = 0; t <= T; ++t)
      for (int64_t n = 0; n < y_stride; ++n) {
        const float got = y[static_cast<size_t>(t * y_stride + n)];
        if (t == T || n >= N) {
          stray |= !std::isnan(got);
          continue;
        }
        double want = 0, mag = 0;
        if (!y0.empty()) {
          want = y0[static_cast<size_t>(t * y_stride + n)];
          mag = std::abs(want);
        }
        for (int64_t k = 0; k < K; ++k) {
          const double p = double(x[static_cast<size_t>(t * x_stride + k)]) * w_f32[static_cast<size_t>(n * K + k)];
          want += p;
          mag += std::abs(p);
        }
        const double e = std::isfinite(got) ? std::abs(got - want) / (mag + 1e-30) : INFINITY;
        worst = std::max(worst, e);
      }
    return {worst, stray};
  }
};

// float32 accumulation of at most a few thousand products, relative to their absolute sum: the
// bound is ~K/32 roundings of 6e-8 per lane plus the warp's tree; 1e-5 leaves a wide margin and
// still fails any wrong index, dropped row or unscaled bf16.
constexpr double kTol = 1e-5;

Backend backend(const ScheduleTable* table = nullptr) {
  return Backend(*live().plugin, *live().dev, BackendOptions{"", 0, table, false});
}

std::vector<GemvParams> all_points() {
  std::vector<GemvParams> out;
  for (int64_t m : {1, 2, 4, 8})
    for (const GemvParams& p : gemv_sweep(m)) out.push_back(p);
  return out;
}

// Shapes exercise both kernels (bf16, f32), the vector path (K a multiple of 8, aligned strides)
// and the scalar one (K odd or a padded x stride off the vector alignment), and N that is not a
// multiple of any CTA's rows.
struct Shape {
  int64_t K, N, pad;
  int32_t dtype;
};
constexpr Shape kShapes[] = {{1024, 333, 0, NINFER_DTYPE_BF16},
                             {776, 130, 4, NINFER_DTYPE_F32},
                             {517, 97, 0, NINFER_DTYPE_BF16},
                             {640, 257, 1, NINFER_DTYPE_F32},
                             {2048, 64, 8, NINFER_DTYPE_BF16}};

} // namespace

TEST(GpuJitLinear, EverySweepPointMatchesAFloat64OracleAtOneToEightTokens) {
  REQUIRE_LIVE_GPU();
  auto rng = test::fresh_rng("GpuJitLinear");
  Backend be = backend();
  int runs = 0, shape_i = 0;
  for (const GemvParams& p : all_points()) {
    const std::string name = gemv_name(p);
    for (int64_t T = 1; T <= 8; ++T) {
      const Shape& s = kShapes[static_cast<size_t>(shape_i++) % std::size(kShapes)];
      Problem pr(be, rng, s.K, s.N, s.dtype, T, s.pad);
      pr.poison(be);
      const ninfer_linear_args a = pr.args();
      ASSERT_NO_THROW(be.run_variant(NINFER_OP_LINEAR, name, pr.shape(), &a)) << name;
      const auto [err, stray] = pr.check(be);
      EXPECT_LE(err, kTol) << name << " T=" << T << " K=" << s.K << " N=" << s.N << " dtype " << s.dtype;
      EXPECT_FALSE(stray) << name << " T=" << T << " wrote outside y[0..T) x [0..N)";
      ++runs;
    }
  }
  EXPECT_EQ(runs, 48 * 8);
}

// accumulate = 1 (y += x . W^T, the residual-stream update): every sweep point at a full, a
// partial and a single-token tile, y starting from random y0 (NaN in the padding and the row
// after, which must stay NaN); then accumulate = 0 on all-NaN y, which a kernel that read y
// would fail. The first four of kShapes: both dtypes, vector and scalar paths.
TEST(GpuJitLinear, AccumulateAddsToYAtEverySweepPoint) {
  REQUIRE_LIVE_GPU();
  auto rng = test::fresh_rng("GpuJitLinearAccumulate");
  Backend be = backend();
  int runs = 0;
  for (const GemvParams& p : all_points()) {
    const std::string name = gemv_name(p);
    for (int64_t T : {int64_t{1}, int64_t{3}, int64_t{8}})
      for (const Shape& s : std::span(kShapes).first(4)) { // all but the last
        Problem pr(be, rng, s.K, s.N, s.dtype, T, s.pad);
        for (int32_t accumulate : {1, 0}) {
          if (accumulate)
            pr.start_from_y0(be, rng);
          else
            pr.poison(be);
          const ninfer_linear_args a = pr.args(accumulate);
          ASSERT_NO_THROW(be.run_variant(NINFER_OP_LINEAR, name, pr.shape(), &a)) << name;
          const auto [err, stray] = pr.check(be);
          EXPECT_LE(err, kTol) << name << " T=" << T << " K=" << s.K << " N=" << s.N << " dtype " << s.dtype
                               << " accumulate=" << accumulate;
          EXPECT_FALSE(stray) << name << " T=" << T << " accumulate=" << accumulate
                              << " wrote outside y[0..T) x [0..N)";
          ++runs;
        }
      }
  }
  EXPECT_EQ(runs, 48 * 3 * 4 * 2);
}

TEST(GpuJitLinear, ResourcesAreTheLoadedFunctionsAndResidencyTheDrivers) {
  REQUIRE_LIVE_GPU();
  const ninfer_device_info& dev = *live().dev;
  Backend be = backend();
  for (const GemvParams& p : all_points()) {
    const std::string name = gemv_name(p);
    const ninfer_variant* made = live().plugin->resolve_variant(dev, NINFER_OP_LINEAR, name);
    ASSERT_NE(made, nullptr) << name;
    const ninfer_variant& v = *made;
    EXPECT_EQ(&v, live().plugin->resolve_variant(dev, NINFER_OP_LINEAR, name)) << "built once per process";
    EXPECT_EQ(std::string(v.name), name);
    EXPECT_EQ(v.tokens_per_cta, p.tokens);
    EXPECT_EQ(v.resources.threads_per_block, p.threads);
    // __launch_bounds__(THREADS) is only visible in the loaded function (a default would be 1024).
    EXPECT_EQ(v.resources.max_threads_per_block, p.threads) << name;
    EXPECT_GT(v.resources.registers_per_thread, 0) << name;
    EXPECT_LE(v.resources.registers_per_thread, 255) << name;

    // An independent load of the same program: the variant reports the kernel that needs more registers.
    CompileRequest r;
    r.name = "linear/" + name;
    r.source = gemv_program_source(p);
    r.cc_major = dev.cc_major;
    r.cc_minor = dev.cc_minor;
    const CompiledKernel k = compile(r, nullptr);
    const LoadedModule m(k, dev.ordinal);
    const auto rb = m.resources(gemv_kernel_name(true), p.threads);
    const auto rf = m.resources(gemv_kernel_name(false), p.threads);
    EXPECT_EQ(v.resources.registers_per_thread, std::max(rb.registers_per_thread, rf.registers_per_thread)) << name;
    const std::set<std::string> symbols{gemv_kernel_name(true), gemv_kernel_name(false)};
    EXPECT_EQ(symbols.count(v.resources.symbol), 1u) << v.resources.symbol;

    ninfer_kernel_resources q{};
    char err[256] = {0};
    ASSERT_EQ(v.query_loaded_resources(v.ctx, &q, err, sizeof err), NINFER_OK) << err;
    EXPECT_EQ(q.registers_per_thread, v.resources.registers_per_thread);
    EXPECT_EQ(q.static_smem_bytes, v.resources.static_smem_bytes);
    EXPECT_EQ(q.local_bytes_per_thread, v.resources.local_bytes_per_thread);
    int32_t driver_blocks = 0;
    ASSERT_EQ(v.query_driver_blocks_per_sm(v.ctx, 0, &driver_blocks, err, sizeof err), NINFER_OK) << err;
    const Plan plan = be.planner().plan_variant(v, {p.tokens, {4096, 4096, 0, 0}, NINFER_DTYPE_BF16});
    EXPECT_EQ(plan.blocks_per_sm, driver_blocks) << name << ": the planner's residency from these resources";
    std::printf("  %-26s %3d registers, %3d B local, %d CTAs/SM\n", name.c_str(), v.resources.registers_per_thread,
                v.resources.local_bytes_per_thread, driver_blocks);
  }
}

// A table naming JIT variants: kept by check_against, planned by name, run correctly; a name that
// does not parse fails the load at its line, naming it.
TEST(GpuJitLinear, AScheduleTableNamingJitVariantsIsHonoured) {
  REQUIRE_LIVE_GPU();
  const LoadedPlugin& plugin = *live().plugin;
  ScheduleTable t;
  t.source = "jit-gpu-test.yaml";
  t.arch = plugin.arch();
  t.entries = {{NINFER_OP_LINEAR, 1, 1, "jit_gemv_t128_r4_v8_m1", std::nullopt, "jit-gpu-test.yaml:3"},
               {NINFER_OP_LINEAR, 2, 8, "jit_gemv_t256_r2_v8_m8", std::nullopt, "jit-gpu-test.yaml:4"}};
  ScheduleTable bad = t;
  bad.entries.push_back({NINFER_OP_LINEAR, 9, 9, "jit_gemv_t128_r4_v8_m99", std::nullopt, "jit-gpu-test.yaml:5"});
  try {
    check_against(bad, plugin, *live().dev);
    ADD_FAILURE() << "a name that does not parse must fail the load";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("jit-gpu-test.yaml:5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("jit_gemv_t128_r4_v8_m99"), std::string::npos) << e.what();
  }
  check_against(t, plugin, *live().dev);
  ASSERT_EQ(t.entries.size(), 2u);
  EXPECT_TRUE(t.warnings.empty());
  Backend be = backend(&t);
  auto rng = test::fresh_rng("GpuJitLinearTable");
  for (int64_t T : {1, 5, 8}) {
    Problem pr(be, rng, 1536, 500, NINFER_DTYPE_BF16, T, 0);
    const Plan& plan = be.plan(NINFER_OP_LINEAR, pr.shape());
    EXPECT_EQ(plan.variant, T == 1 ? "jit_gemv_t128_r4_v8_m1" : "jit_gemv_t256_r2_v8_m8");
    EXPECT_EQ(plan.source, T == 1 ? "jit-gpu-test.yaml:3" : "jit-gpu-test.yaml:4");
    pr.poison(be);
    const ninfer_linear_args a = pr.args();
    be.run(NINFER_OP_LINEAR, pr.shape(), &a);
    const auto [err, stray] = pr.check(be);
    EXPECT_LE(err, kTol) << "T=" << T;
    EXPECT_FALSE(stray);
  }
}

// As an engine starts: a tuned table for this card in the cache dir names a JIT variant; the
// backend (tuned tables on, no table given) builds it and plans with it.
TEST(GpuJitLinear, ATunedTableInTheCacheNamingAJitVariantIsUsedAtStart) {
  REQUIRE_LIVE_GPU();
  const LoadedPlugin& plugin = *live().plugin;
  const fs::path cache = fs::temp_directory_path() / ("ninfer-jit-tuned-" + std::to_string(::getpid()));
  fs::remove_all(cache);
  const char* old = std::getenv("NINFER_CACHE_DIR");
  const std::string saved = old ? old : "";
  ::setenv("NINFER_CACHE_DIR", cache.c_str(), 1);
  ScheduleTable t = builtin_schedule_table(plugin, *live().dev);
  t.device = schedule_device(plugin, *live().dev);
  t.entries.insert(t.entries.begin(), {NINFER_OP_LINEAR, 1, 2, "jit_gemv_t256_r4_v4_m2", std::nullopt, ""});
  save_schedule_table(t, tuned_table_path(plugin, *live().dev));
  {
    Backend be(plugin, *live().dev); // default options: the tuned table for this device
    const Plan& plan = be.plan(NINFER_OP_LINEAR, {2, {4096, 1024, 0, 0}, NINFER_DTYPE_BF16});
    EXPECT_EQ(plan.variant, "jit_gemv_t256_r4_v4_m2") << plan.reason;
    EXPECT_NE(plan.reason.find(tuned_table_path(plugin, *live().dev).string()), std::string::npos) << plan.reason;
  }
  if (old) ::setenv("NINFER_CACHE_DIR", saved.c_str(), 1);
  else ::unsetenv("NINFER_CACHE_DIR");
  fs::remove_all(cache);
}

// Decode steps are CUDA graphs: a JIT launch (cudaLaunchKernel) recorded once replays correctly.
TEST(GpuJitLinear, ARecordedJitLaunchReplays) {
  REQUIRE_LIVE_GPU();
  Backend be = backend();
  if (!be.can_record()) GTEST_SKIP() << "this backend cannot record";
  auto rng = test::fresh_rng("GpuJitLinearGraph");
  Problem pr(be, rng, 2048, 700, NINFER_DTYPE_BF16, 4, 0);
  const ninfer_linear_args a = pr.args();
  const std::string name = "jit_gemv_t128_r2_v8_m4";
  be.run_variant(NINFER_OP_LINEAR, name, pr.shape(), &a); // built (and run once) before recording
  const auto rec = be.record([&] { be.run_variant(NINFER_OP_LINEAR, name, pr.shape(), &a); });
  pr.poison(be);
  be.replay(*rec);
  const auto [err, stray] = pr.check(be);
  EXPECT_LE(err, kTol);
  EXPECT_FALSE(stray);
}
