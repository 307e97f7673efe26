// gdn_gating on the GPU plugin against the CPU reference plugin, at T = 1, every route
// boundary +-1 of this device, and large T, for the planner's route and for every variant
// forced (which exercises sliced cooperative launches). Fresh inputs every run; outputs are
// poisoned (NaN) before every launch so an unwritten element fails.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <thread>

#include "described_cards.hpp"
#include "gpu_env.hpp"
#include "ninfer/abi/ops/gdn_gating.h"
#include "ninfer/devices/device.hpp"
#include "ninfer/planning/occupancy.hpp"
#include "ninfer/planning/planner.hpp"
#include "ninfer/planning/schedule_table.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

// Float32 accumulation over a 5120-long dot product against the reference's double sums;
// inputs are identical, only summation order and width differ.
constexpr Tolerance kF32LongReduction{"f32-accumulate-5120", 2e-5, 2e-5};

constexpr int kHidden = 5120, kHeads = 48;
constexpr int64_t kMaxTokens = 8192;

struct Inputs {
  int32_t dtype;
  std::vector<float> x, wa, wb;           // values as the op sees them
  std::vector<uint16_t> xb, wab, wbb;     // bf16 encodings (dtype BF16)
  std::vector<float> a_log, dt_bias;
  std::vector<double> g_ref, beta_ref;    // CPU reference for all kMaxTokens tokens
};

Inputs make_inputs(int32_t dtype, std::mt19937_64& rng) {
  Inputs in;
  in.dtype = dtype;
  std::normal_distribution<float> n01(0.f, 1.f);
  auto fill = [&](std::vector<float>& f, std::vector<uint16_t>& b, size_t n, float scale) {
    f.resize(n);
    b.resize(n);
    for (size_t i = 0; i < n; ++i) {
      f[i] = n01(rng) * scale;
      b[i] = to_bf16(f[i]);
      if (dtype == NINFER_DTYPE_BF16) f[i] = from_bf16(b[i]);
    }
  };
  fill(in.x, in.xb, static_cast<size_t>(kMaxTokens) * kHidden, 1.f);
  fill(in.wa, in.wab, static_cast<size_t>(kHeads) * kHidden, 1.f / std::sqrt(float(kHidden)));
  fill(in.wb, in.wbb, static_cast<size_t>(kHeads) * kHidden, 2.f / std::sqrt(float(kHidden)));
  in.a_log.resize(kHeads);
  in.dt_bias.resize(kHeads);
  for (int h = 0; h < kHeads; ++h) {
    in.a_log[h] = n01(rng) * 0.5f;
    in.dt_bias[h] = n01(rng);
  }
  // The CPU plugin's reference variant, run over token ranges on all host cores.
  const LoadedPlugin* cpu = build_plugins().find("cpu");
  const ninfer_variant* ref = cpu->find_variant(NINFER_OP_GDN_GATING, "reference");
  std::vector<float> g(kMaxTokens * kHeads), beta(kMaxTokens * kHeads);
  const bool f32 = dtype == NINFER_DTYPE_F32;
  ninfer_gdn_gating_args args{f32 ? (const void*)in.x.data() : in.xb.data(), kHidden,
                              f32 ? (const void*)in.wa.data() : in.wab.data(),
                              f32 ? (const void*)in.wb.data() : in.wbb.data(), in.a_log.data(), in.dt_bias.data(),
                              g.data(), beta.data(), kMaxTokens, kHidden, kHeads, dtype};
  const int threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      ninfer_launch l{kMaxTokens * t / threads, kMaxTokens * (t + 1) / threads, 1, 1, 1, 0, 0, nullptr, 0, nullptr};
      char err[128];
      ref->launch(ref->ctx, &args, &l, nullptr, err, sizeof err);
    });
  for (auto& th : pool) th.join();
  in.g_ref.assign(g.begin(), g.end());
  in.beta_ref.assign(beta.begin(), beta.end());
  return in;
}

// Token counts worth testing on this device: 1, small, every cooperative variant's
// single-launch capacity +-1 (the planner's route boundaries), and large T.
std::set<int64_t> token_counts(const LoadedPlugin& plugin, const ninfer_device_info& dev, int32_t dtype) {
  std::set<int64_t> ts = {1, 2, 3, 7, 8, 9, 1000, 4096, 8191, 8192};
  ninfer_shape s{1, {kHidden, kHeads, 0, 0}, dtype};
  for (const ninfer_variant* v : plugin.variants_for(NINFER_OP_GDN_GATING)) {
    if (!v->cooperative) continue;
    const int64_t res = occupancy(v->resources, v->dynamic_smem_bytes(v->ctx, &s), dev).residency;
    const int64_t cap = res / v->split_k * v->tokens_per_cta;
    for (int64_t t : {cap - 1, cap, cap + 1, 2 * cap + 1})
      if (t >= 1 && t <= kMaxTokens) ts.insert(t);
  }
  return ts;
}

void run_and_check(const Plan& p, const Inputs& in, int64_t T, const std::string& label) {
  const bool f32 = in.dtype == NINFER_DTYPE_F32;
  const size_t esz = f32 ? 4 : 2;
  DeviceBuffer x(T * kHidden * esz), wa(kHeads * kHidden * esz), wb(kHeads * kHidden * esz);
  DeviceBuffer a_log(kHeads * 4), dt_bias(kHeads * 4), g(T * kHeads * 4), beta(T * kHeads * 4);
  DeviceBuffer ws(std::max<size_t>(p.workspace_bytes, 4));
  x.upload(f32 ? (const void*)in.x.data() : in.xb.data(), x.bytes());
  wa.upload(f32 ? (const void*)in.wa.data() : in.wab.data(), wa.bytes());
  wb.upload(f32 ? (const void*)in.wb.data() : in.wbb.data(), wb.bytes());
  a_log.upload(in.a_log.data(), a_log.bytes());
  dt_bias.upload(in.dt_bias.data(), dt_bias.bytes());
  g.poison();
  beta.poison();
  ws.poison();
  ninfer_gdn_gating_args args{x.get(), kHidden, wa.get(), wb.get(), a_log.as<float>(), dt_bias.as<float>(),
                              g.as<float>(), beta.as<float>(), T, kHidden, kHeads, in.dtype};
  execute(p, &args, ws.get(), nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> got_g(T * kHeads), got_beta(T * kHeads);
  g.download(got_g.data(), g.bytes());
  beta.download(got_beta.data(), beta.bytes());
  const std::vector<double> want_g(in.g_ref.begin(), in.g_ref.begin() + T * kHeads);
  const std::vector<double> want_beta(in.beta_ref.begin(), in.beta_ref.begin() + T * kHeads);
  const Mismatch mg = compare(got_g, want_g, kF32LongReduction);
  const Mismatch mb = compare(got_beta, want_beta, kF32LongReduction);
  EXPECT_TRUE(mg.ok) << label << " g: " << mg.describe();
  EXPECT_TRUE(mb.ok) << label << " beta: " << mb.describe();
}

} // namespace

TEST(GpuGdnGating, MatchesCpuReferenceOnEveryRouteAndBoundary) {
  NINFER_REQUIRE_GPU();
  auto rng = fresh_rng("gdn_gating gpu");
  const ScheduleTable table = builtin_schedule_table(*gpu().plugin, gpu().device);
  Planner planner(*gpu().plugin, gpu().device, &table);
  for (int32_t dtype : {NINFER_DTYPE_BF16, NINFER_DTYPE_F32}) {
    const Inputs in = make_inputs(dtype, rng);
    std::set<std::string> routes_seen;
    for (int64_t T : token_counts(*gpu().plugin, gpu().device, dtype)) {
      const ninfer_shape s{T, {kHidden, kHeads, 0, 0}, dtype};
      const Plan chosen = planner.plan(NINFER_OP_GDN_GATING, s);
      routes_seen.insert(chosen.variant);
      run_and_check(chosen, in, T, "T=" + std::to_string(T) + " route " + chosen.variant + " dtype " + std::to_string(dtype));
      for (const ninfer_variant* v : gpu().plugin->variants_for(NINFER_OP_GDN_GATING)) {
        if (v->supports && !v->supports(v->ctx, &s)) continue; // declined shapes (per_head: long calls)
        const Plan forced = planner.plan_variant(*v, s);
        run_and_check(forced, in, T, "T=" + std::to_string(T) + " forced " + v->name + " (" +
                                         std::to_string(forced.launches.size()) + " launches) dtype " +
                                         std::to_string(dtype));
      }
      if (HasFailure()) return;
    }
    // The boundaries above must have walked through more than one route.
    EXPECT_GE(routes_seen.size(), 3u);
  }
}
