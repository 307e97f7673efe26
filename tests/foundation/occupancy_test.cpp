#include <gtest/gtest.h>

#include "described_cards.hpp"
#include "ninfer/planning/occupancy.hpp"
#include "residency_oracle.hpp"

using namespace ninfer;
using namespace ninfer::test;

TEST(Occupancy, TheKernelThatCrashedA4080Super) {
  // From the brief: 512 threads x 74 registers = 37,888 registers per CTA; an SM has 65,536,
  // so exactly one CTA fits per SM and an 80-SM card holds 80, not 160.
  const ninfer_device_info d = catalog().describe(catalog().require_device("RTX 4080 SUPER"));
  ninfer_kernel_resources k{"k", 512, 74, 0, 0, 512};
  const Occupancy occ = occupancy(k, 0, d);
  EXPECT_EQ(occ.blocks_per_sm, 1);
  EXPECT_EQ(occ.residency, 80);
  EXPECT_EQ(occ.limiter, "registers");
}

TEST(Occupancy, AgreesWithTheResidencyRulesOnRandomKernels) {
  auto rng = fresh_rng("occupancy");
  std::uniform_int_distribution<int> warps(1, 32), regs(16, 255), static_smem(0, 48 * 1024);
  std::uniform_int_distribution<int> dyn_kib(0, 240);
  for (const auto& arch : catalog().archs()) {
    // Any card of the architecture: residency per SM does not depend on the SM count.
    const KnownDevice* card = nullptr;
    for (const auto& d : catalog().devices())
      if (d.arch == arch.name) card = &d;
    ASSERT_NE(card, nullptr) << arch.name;
    const ninfer_device_info dev = catalog().describe(*card);
    for (int i = 0; i < 20000; ++i) {
      const int threads = warps(rng) * 32;
      ninfer_kernel_resources k{"k", threads, regs(rng), static_smem(rng) / 16 * 16, 0, threads};
      const int64_t dyn = static_cast<int64_t>(dyn_kib(rng)) * 1024;
      const int want = oracle_blocks_per_sm(k, dyn, dev);
      const Occupancy got = occupancy(k, static_cast<size_t>(dyn), dev);
      ASSERT_EQ(got.blocks_per_sm, want) << arch.name << ": " << threads << " threads, " << k.registers_per_thread
                                         << " regs, " << k.static_smem_bytes << " B static + " << dyn << " B dynamic";
      ASSERT_EQ(got.residency, static_cast<int64_t>(want) * dev.sm_count);
    }
  }
}

TEST(Occupancy, WaveEfficiency) {
  EXPECT_DOUBLE_EQ(wave_efficiency(160, 160), 1.0);
  EXPECT_DOUBLE_EQ(wave_efficiency(161, 160), 161.0 / 320.0);
  EXPECT_DOUBLE_EQ(wave_efficiency(80, 160), 0.5);
  EXPECT_DOUBLE_EQ(wave_efficiency(0, 160), 0.0);
}
