#include <gtest/gtest.h>

#include "ninfer/abi/ops/gated_delta_rule.h"
#include "ninfer/abi/ops/linear.h"
#include "ninfer/support/error.hpp"
#include "op_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

TEST(Backend, BuffersRoundTripAndAreAccounted) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("backend buffers");
  const auto data = randn(rng, 1000);
  {
    DeviceBuffer b = be.allocate(4000, MemoryUse::Weights, "test weights");
    EXPECT_EQ(be.memory().in_use[static_cast<size_t>(MemoryUse::Weights)], 4000u);
    be.upload(b, 0, data.data(), 4000);
    std::vector<float> back(500, 0.f);
    be.download(b, 2000, back.data(), 2000);
    for (int i = 0; i < 500; ++i) ASSERT_EQ(back[i], data[500 + i]);
    be.zero(b, 0, 4000);
    be.download(b, 0, back.data(), 2000);
    for (float v : back) ASSERT_EQ(v, 0.f);
    EXPECT_THROW(be.upload(b, 3000, data.data(), 2000), Error) << "an upload past the end must be refused";
  }
  EXPECT_EQ(be.memory().total, 0u) << "freed buffers return their bytes";
  EXPECT_GE(be.memory().peak, 4000u);
}

TEST(Backend, MemoryLimitRefusesWithAMessageNamingTheBuffer) {
  const LoadedPlugin* cpu = op_test_plugins().find("cpu");
  ASSERT_NE(cpu, nullptr);
  BackendOptions o;
  o.memory_limit = 1 << 20;
  Backend be(*cpu, host_device(), o);
  DeviceBuffer a = be.allocate(800 << 10, MemoryUse::KvCache, "layer 3 KV cache");
  try {
    DeviceBuffer b = be.allocate(400 << 10, MemoryUse::State, "layer 0 GDN state");
    FAIL() << "the limit was not enforced";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 0 GDN state"), std::string::npos) << e.what();
  }
}

// run() never allocates: an op that needs workspace must have it reserved first.
TEST(Backend, RunRefusesAnOpWhoseWorkspaceWasNotReserved) {
  Backend be = cpu_backend();
  const ninfer_shape s{4, {4, 2, 8, 8}, NINFER_DTYPE_F32};
  ASSERT_GT(be.plan(NINFER_OP_GATED_DELTA_RULE, s).workspace_bytes, 0u);
  ninfer_gated_delta_rule_args a{};
  EXPECT_THROW(be.run(NINFER_OP_GATED_DELTA_RULE, s, &a), Error);
  be.reserve_workspace(NINFER_OP_GATED_DELTA_RULE, s);
  EXPECT_GE(be.workspace_bytes(), be.plan(NINFER_OP_GATED_DELTA_RULE, s).workspace_bytes);
}

TEST(Backend, UnknownOpIsAnErrorNamingIt) {
  Backend be = cpu_backend();
  try {
    be.plan("no_such_op", {1, {1, 1, 0, 0}, NINFER_DTYPE_F32});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_op"), std::string::npos) << e.what();
  }
}
