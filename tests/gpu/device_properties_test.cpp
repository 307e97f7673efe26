// The live device agrees with what arch/ says about its architecture and card: the data the
// planner uses for cards we do not have is checked on the one we do.
#include <gtest/gtest.h>

#include "described_cards.hpp"
#include "gpu_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

TEST(GpuDevice, MatchesArchitectureData) {
  NINFER_REQUIRE_GPU();
  const ninfer_device_info& d = gpu().device;
  // cuda-generic is built for no real architecture: check the device's own.
  const std::string arch = is_generic_plugin(*gpu().plugin) ? std::string(d.arch) : gpu().plugin->arch();
  const ArchLimits* a = catalog().find_arch(arch);
  ASSERT_NE(a, nullptr) << arch;
  EXPECT_EQ(d.cc_major, a->cc_major);
  EXPECT_EQ(d.cc_minor, a->cc_minor);
  EXPECT_EQ(d.regs_per_sm, a->regs_per_sm);
  EXPECT_EQ(d.regs_per_block, a->regs_per_block);
  EXPECT_EQ(d.smem_per_sm, a->smem_per_sm);
  EXPECT_EQ(d.smem_per_block, a->smem_per_block);
  EXPECT_EQ(d.smem_per_block_optin, a->smem_per_block_optin);
  EXPECT_EQ(d.reserved_smem_per_block, a->reserved_smem_per_block);
  EXPECT_EQ(d.max_threads_per_sm, a->max_threads_per_sm);
  EXPECT_EQ(d.max_threads_per_block, a->max_threads_per_block);
  EXPECT_EQ(d.max_blocks_per_sm, a->max_blocks_per_sm);
  EXPECT_EQ(d.warp_size, a->warp_size);
  EXPECT_EQ(d.cooperative_launch, 1);
}

TEST(GpuDevice, KnownCardHasItsListedSmCount) {
  NINFER_REQUIRE_GPU();
  const KnownDevice* k = catalog().find_device(gpu().device.name);
  if (!k) GTEST_SKIP() << gpu().device.name << " is not in arch/devices.yaml";
  EXPECT_EQ(gpu().device.sm_count, k->sm_count);
  EXPECT_EQ(k->arch, is_generic_plugin(*gpu().plugin) ? std::string(gpu().device.arch) : gpu().plugin->arch());
}
