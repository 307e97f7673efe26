#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "described_cards.hpp"
#include "ninfer/abi/ops/gdn_gating.h"
#include "ninfer/devices/device.hpp"
#include "ninfer/planning/planner.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

// The op's math in double, written from the contract in gdn_gating.h.
void oracle(const std::vector<double>& x, const std::vector<double>& wa, const std::vector<double>& wb,
            const std::vector<float>& a_log, const std::vector<float>& dt_bias, int64_t T, int H, int heads,
            std::vector<double>& g, std::vector<double>& beta) {
  g.assign(T * heads, 0);
  beta.assign(T * heads, 0);
  for (int64_t t = 0; t < T; ++t)
    for (int h = 0; h < heads; ++h) {
      double a = 0, b = 0;
      for (int k = 0; k < H; ++k) {
        a += x[t * H + k] * wa[h * H + k];
        b += x[t * H + k] * wb[h * H + k];
      }
      const double z = a + dt_bias[h];
      const double sp = z > 20 ? z : std::log(1 + std::exp(z));
      g[t * heads + h] = -std::exp(static_cast<double>(a_log[h])) * sp;
      beta[t * heads + h] = 1 / (1 + std::exp(-b));
    }
}

} // namespace

TEST(GdnGatingCpu, MatchesDoubleOracleOnFreshInputs) {
  const LoadedPlugin* cpu = build_plugins().find("cpu");
  ASSERT_NE(cpu, nullptr);
  Planner planner(*cpu, host_device());
  auto rng = fresh_rng("gdn_gating cpu");
  std::normal_distribution<float> n01(0.f, 1.f);
  for (int32_t dtype : {NINFER_DTYPE_F32, NINFER_DTYPE_BF16}) {
    for (auto [T, H, heads] : {std::tuple{1, 64, 4}, {7, 96, 6}, {65, 128, 48}}) {
      const float wscale = 1.f / std::sqrt(static_cast<float>(H));
      std::vector<double> x(T * H), wa(heads * H), wb(heads * H);
      std::vector<float> xf(x.size()), waf(wa.size()), wbf(wb.size());
      std::vector<uint16_t> xb(x.size()), wab(wa.size()), wbb(wb.size());
      auto fill = [&](std::vector<double>& d, std::vector<float>& f, std::vector<uint16_t>& b, float scale) {
        for (size_t i = 0; i < d.size(); ++i) {
          f[i] = n01(rng) * scale;
          b[i] = to_bf16(f[i]);
          if (dtype == NINFER_DTYPE_BF16) f[i] = from_bf16(b[i]); // the oracle sees what the op sees
          d[i] = f[i];
        }
      };
      fill(x, xf, xb, 2.f);
      fill(wa, waf, wab, wscale * 4);
      fill(wb, wbf, wbb, wscale * 4);
      std::vector<float> a_log(heads), dt_bias(heads);
      for (int h = 0; h < heads; ++h) {
        a_log[h] = n01(rng) * 0.5f;
        dt_bias[h] = n01(rng);
      }
      std::vector<double> g_ref, beta_ref;
      oracle(x, wa, wb, a_log, dt_bias, T, H, heads, g_ref, beta_ref);

      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::vector<float> g(T * heads, nan), beta(T * heads, nan); // poisoned
      const bool f32 = dtype == NINFER_DTYPE_F32;
      ninfer_gdn_gating_args args{f32 ? static_cast<const void*>(xf.data()) : xb.data(), H,
                                  f32 ? static_cast<const void*>(waf.data()) : wab.data(),
                                  f32 ? static_cast<const void*>(wbf.data()) : wbb.data(),
                                  a_log.data(), dt_bias.data(), g.data(), beta.data(), T, H, heads, dtype};
      ninfer_shape s{T, {H, heads, 0, 0}, dtype};
      const Plan p = planner.plan(NINFER_OP_GDN_GATING, s);
      execute(p, &args, nullptr, nullptr);
      const Mismatch mg = compare(g, g_ref, kFloat32Exact), mb = compare(beta, beta_ref, kFloat32Exact);
      EXPECT_TRUE(mg.ok) << "g T=" << T << " dtype " << dtype << ": " << mg.describe();
      EXPECT_TRUE(mb.ok) << "beta T=" << T << " dtype " << dtype << ": " << mb.describe();
    }
  }
}
