// The build-time resource table (from ptxas) is what the device really loaded, and the
// planner's residency equals the driver's for every registered kernel.
#include <gtest/gtest.h>

#include "gpu_env.hpp"
#include "ninfer/planning/occupancy.hpp"
#include "ninfer/planning/op_catalog.hpp"

using namespace ninfer;
using namespace ninfer::test;

TEST(GpuKernels, FuncAttributesMatchBuildTimeResources) {
  NINFER_REQUIRE_GPU();
  ASSERT_FALSE(gpu().plugin->variants.empty());
  for (const ninfer_variant* v : gpu().plugin->variants) {
    ASSERT_NE(v->query_loaded_resources, nullptr) << v->op << "/" << v->name;
    ninfer_kernel_resources live{};
    char err[256] = {0};
    ASSERT_EQ(v->query_loaded_resources(v->ctx, &live, err, sizeof err), NINFER_OK) << err;
    const ninfer_kernel_resources& built = v->resources;
    EXPECT_STREQ(live.symbol, built.symbol);
    EXPECT_EQ(live.registers_per_thread, built.registers_per_thread) << built.symbol;
    EXPECT_EQ(live.static_smem_bytes, built.static_smem_bytes) << built.symbol;
    EXPECT_EQ(live.local_bytes_per_thread, built.local_bytes_per_thread) << built.symbol;
    EXPECT_EQ(live.max_threads_per_block, built.max_threads_per_block) << built.symbol;
  }
}

TEST(GpuKernels, PlannerResidencyEqualsTheDriversForEveryVariant) {
  NINFER_REQUIRE_GPU();
  for (const ninfer_variant* v : gpu().plugin->variants) {
    const OpInfo& op = require_op(v->op);
    for (int32_t dtype : {NINFER_DTYPE_BF16, NINFER_DTYPE_F32}) {
      ninfer_shape s{1, {op.default_dims[0], op.default_dims[1], op.default_dims[2], op.default_dims[3]}, dtype};
      const size_t dyn = v->dynamic_smem_bytes ? v->dynamic_smem_bytes(v->ctx, &s) : 0;
      int32_t driver = -1;
      char err[256] = {0};
      ASSERT_EQ(v->query_driver_blocks_per_sm(v->ctx, dyn, &driver, err, sizeof err), NINFER_OK) << err;
      EXPECT_EQ(occupancy(v->resources, dyn, gpu().device).blocks_per_sm, driver)
          << v->op << "/" << v->name << " with " << dyn << " B dynamic shared memory";
    }
  }
}
