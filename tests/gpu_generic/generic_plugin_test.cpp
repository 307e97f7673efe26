// cuda-generic on the live GPU, beside the exact plugin: it scores above zero and below the exact
// one, registers every op and variant the exact plugin has, and its resources are the loaded
// kernels'. (The op, kernel and fixture checks run on it too: the gpu_tests, gpu_op_tests and
// gpu_model_tests binaries with NINFER_TEST_PLUGIN=cuda-generic, see docs/validation.md.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "described_cards.hpp"
#include "ninfer/devices/device.hpp"

using namespace ninfer;
using namespace ninfer::test;

TEST(GpuGenericPlugin, ScoresBelowTheExactPluginAndCoversItsVariants) {
  const Discovery d = discover_devices();
  if (d.cuda.empty()) GTEST_SKIP() << "no CUDA device (" << d.note << ")";
  const LoadedPlugin* g = build_plugins().find("cuda-generic");
  if (!g) GTEST_SKIP() << "this build has no cuda-generic plugin";
  const ninfer_device_info& dev = d.cuda.front();
  const PluginChoice c = build_plugins().choose(dev);
  int generic_score = -1, best_exact = 0;
  std::string generic_reason;
  const LoadedPlugin* exact = nullptr;
  for (const auto& s : c.scores) {
    std::printf("  %-12s score %3d  %s\n", s.plugin->name().c_str(), s.score, s.reason.c_str());
    if (s.plugin == g) generic_score = s.score, generic_reason = s.reason;
    else if (s.plugin->arch() != "cpu" && s.score > best_exact) best_exact = s.score, exact = s.plugin;
  }
  if (dev.cc_major < 8) {
    EXPECT_EQ(generic_score, 0);
    return;
  }
  EXPECT_GT(generic_score, 0);
  // Its kernels are NVRTC's, compiled for this card, unless that path is switched off (then the
  // driver's compile of the compute_80 PTX).
  const char* nvrtc_env = std::getenv("NINFER_GENERIC_NVRTC");
  const bool nvrtc_off = nvrtc_env && std::string(nvrtc_env) == "0";
  EXPECT_NE(generic_reason.find(nvrtc_off ? "compute_80 PTX" : "compiled by NVRTC for sm_"), std::string::npos)
      << generic_reason;
  if (!exact) GTEST_SKIP() << "no exact plugin for " << dev.name << " in this build to compare with";
  EXPECT_LT(generic_score, best_exact);
  EXPECT_EQ(c.chosen, exact) << "the exact plugin must win";
  EXPECT_EQ(build_plugins().choose(dev, "cuda-generic").chosen, g) << "--plugin cuda-generic must be allowed";
  std::set<std::pair<std::string, std::string>> want, have;
  for (const ninfer_variant* v : exact->variants) want.insert({v->op, v->name});
  for (const ninfer_variant* v : g->variants) have.insert({v->op, v->name});
  EXPECT_EQ(have, want);
  for (const ninfer_variant* v : g->variants) {
    ninfer_kernel_resources live{};
    char err[256] = {0};
    ASSERT_EQ(v->query_loaded_resources(v->ctx, &live, err, sizeof err), NINFER_OK) << err;
    EXPECT_EQ(live.registers_per_thread, v->resources.registers_per_thread) << v->op << "/" << v->name;
    EXPECT_EQ(live.static_smem_bytes, v->resources.static_smem_bytes) << v->op << "/" << v->name;
  }
}
