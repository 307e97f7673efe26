// ninfer-info as a user runs it: a real process, its exit status, stdout and stderr.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "described_cards.hpp"
#include "process.hpp"
#include "temp_dir.hpp"

using namespace ninfer::test;

namespace {

using ninfer::test::ProcessOutput;

// An empty cache directory of this test process: the machine's own ~/.cache/ninfer may hold a
// tuned table (from any ninfer-tune run), which the default run would report instead of none.
const std::string& empty_cache_dir() {
  static const ninfer::test::TempDir dir;
  static const std::string path = dir.path().string();
  return path;
}

// Runs ninfer-info with `args`; stderr is appended after stdout when asked.
ProcessOutput run_info(const std::string& args, bool with_stderr = false) {
  ProcessOutput r = run_process("NINFER_CACHE_DIR=" + empty_cache_dir() + " " + std::string(NINFER_INFO_BIN) + " " + args);
  if (with_stderr) r.out += r.err;
  return r;
}

} // namespace

TEST(NinferInfo, PlanJsonForADescribedCard) {
  if (cuda_plugins().empty()) GTEST_SKIP() << "build has no CUDA plugins";
  const ProcessOutput r = run_info("--plan gdn_gating --tokens 1665 --device-model 'RTX 4080 SUPER' --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["op"], "gdn_gating");
  EXPECT_EQ(j["tokens"], 1665);
  EXPECT_EQ(j["device"]["name"], "RTX 4080 SUPER");
  EXPECT_EQ(j["device"]["sm_count"], 80);
  EXPECT_TRUE(j["cooperative"].is_boolean());
  EXPECT_TRUE(j["route"].is_string());
  EXPECT_EQ(j["route"], j["variant"]);
  const int64_t residency = j["residency"];
  EXPECT_EQ(residency, j["blocks_per_sm"].get<int64_t>() * 80);
  int64_t next = 0;
  for (const auto& l : j["launches"]) {
    EXPECT_EQ(l["tokens"][0], next);
    next = l["tokens"][1];
    const int64_t ctas = l["grid"][0].get<int64_t>() * l["grid"][1].get<int64_t>();
    if (j["cooperative"]) EXPECT_LE(ctas, residency);
  }
  EXPECT_EQ(next, 1665);
}

// A library variant (linear/cublaslt on the H200's table) prints as one library call over the
// whole token range, with its helper kernel, in text and JSON.
TEST(NinferInfo, LibraryPlanIsOneCallOverAllTokens) {
  if (cuda_plugins().empty()) GTEST_SKIP() << "build has no CUDA plugins";
  if (!plugin_for_arch("sm_90")) GTEST_SKIP() << "build has no sm_90 plugin";
  const ProcessOutput t = run_info("--plan linear --tokens 5000 --dtype bf16 --device-model H200");
  ASSERT_EQ(t.status, 0) << t.out;
  EXPECT_NE(t.out.find("route        cublaslt"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("library call over the whole token range"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("helper       ninfer_linear_cast_bf16"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("tokens [0, 5000)  one library call"), std::string::npos) << t.out;
  const ProcessOutput r = run_info("--plan linear --tokens 5000 --dtype bf16 --device-model H200 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["variant"], "cublaslt");
  EXPECT_EQ(j["library"], true);
  ASSERT_EQ(j["launches"].size(), 1u);
  EXPECT_EQ(j["launches"][0]["tokens"][0], 0);
  EXPECT_EQ(j["launches"][0]["tokens"][1], 5000);
  EXPECT_GT(j["launches"][0]["workspace_bytes"].get<int64_t>(), 0);
}

// The H200's (sm_90) attention routes on a float16 cache: prompts on the tensor-core prefill
// (hd256 from 65 tokens on the pipelined mma.sync kernel, hd128 from 129 on the warpgroup-MMA
// one, which only the sm_90a plugin has), while an hd128 call of 65-128 tokens (a
// conversation's next turn in one pass) stays on the split-KV decode's runs, and an hd256 decode
// step plans the split-KV decode, whose launch takes the tensor-core kernel with its 16-key tiles'
// shared memory (decode_mma_smem_bytes(256): 143,616 bytes).
TEST(NinferInfo, SixteenBitAttentionRoutesOnTheH200) {
  if (!plugin_for_arch("sm_90")) GTEST_SKIP() << "build has no sm_90 plugin";
  auto plan = [](const std::string& args) {
    const ProcessOutput r = run_info("--plan attention " + args + " --dtype f16 --device-model H200 --json");
    EXPECT_EQ(r.status, 0) << r.out;
    return r.status == 0 ? nlohmann::json::parse(r.out) : nlohmann::json{};
  };
  EXPECT_EQ(plan("--tokens 4096 --dims 256,24,4,4096")["variant"], "prefill_mma_f16_hd256_pipe");
  EXPECT_EQ(plan("--tokens 65 --dims 256,24,4,4096")["variant"], "prefill_mma_f16_hd256_pipe");
  EXPECT_EQ(plan("--tokens 4096 --dims 128,32,8,4096")["variant"], "prefill_mma_f16_hd128_wgmma");
  const auto runs = plan("--tokens 101 --dims 128,32,8,8328");
  EXPECT_EQ(runs["variant"].get<std::string>().rfind("decode_split", 0), 0u) << runs["variant"];
  const auto step = plan("--tokens 1 --dims 256,24,4,131072");
  EXPECT_EQ(step["variant"].get<std::string>().rfind("decode_split", 0), 0u) << step["variant"];
  EXPECT_EQ(step["launches"][0]["dynamic_smem_bytes"], 143616) << step.dump();
}

// For the KV ops, --dtype int8 / fp8 / int4r name the compact cache formats (kv_append.h), not
// weight formats: a decode plans on the split-KV decode, a prompt on the tiled prefill (the
// variants that read them), and the fused decode op runs unfused.
TEST(NinferInfo, KvOpsPlanTheCompactCacheFormats) {
  if (!plugin_for_arch("sm_90")) GTEST_SKIP() << "build has no sm_90 plugin";
  for (const char* dtype : {"int8", "fp8", "int4r"}) {
    SCOPED_TRACE(dtype);
    const std::string d = std::string(" --dtype ") + dtype + " --device-model H200 --json";
    const ProcessOutput decode = run_info("--plan attention --tokens 1 --dims 256,24,4,4096" + d);
    ASSERT_EQ(decode.status, 0) << decode.out;
    const auto j = nlohmann::json::parse(decode.out);
    EXPECT_EQ(j["dtype"], std::string("kv_") + dtype);
    EXPECT_EQ(j["variant"].get<std::string>().rfind("decode_split", 0), 0u) << j["variant"];
    const ProcessOutput prompt = run_info("--plan attention --tokens 512 --dims 256,24,4,4096" + d);
    ASSERT_EQ(prompt.status, 0) << prompt.out;
    EXPECT_EQ(nlohmann::json::parse(prompt.out)["variant"], "prefill_hd256");
    const ProcessOutput fused = run_info("--plan head_norm_rope_append_attention --tokens 1 --dims 128,32,8,4096" + d);
    ASSERT_EQ(fused.status, 0) << fused.out;
    EXPECT_EQ(nlohmann::json::parse(fused.out)["route"], "unfused");
  }
}

// One-token linear on an RTX 4090 (a decode step's projections) is the prebuilt CUDA-core GEMV
// of arch/schedules/sm_89.yaml: one ordinary launch of 128-thread CTAs over the token. (The
// H200's table takes gemv_4warps there, measured faster inside its decode step.)
TEST(NinferInfo, OneTokenLinearOnAnRtx4090IsTheCudaCoreGemv) {
  if (!plugin_for_arch("sm_89")) GTEST_SKIP() << "build has no sm_89 plugin";
  const ProcessOutput r = run_info("--plan linear --tokens 1 --dtype bf16 --device-model 'RTX 4090' --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["variant"], "gemv_warp_t1");
  EXPECT_EQ(j["library"], false);
  EXPECT_EQ(j["cooperative"], false);
  ASSERT_EQ(j["launches"].size(), 1u);
  EXPECT_EQ(j["launches"][0]["tokens"][0], 0);
  EXPECT_EQ(j["launches"][0]["tokens"][1], 1);
  EXPECT_EQ(j["launches"][0]["block"], 128);
}

TEST(NinferInfo, DefaultRunListsPluginsAndChoosesForTheHost) {
  const ProcessOutput r = run_info("");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("Plugins"), std::string::npos);
  EXPECT_NE(r.out.find("-> chosen: cpu"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("schedule table: (none) (0 entries)"), std::string::npos) << r.out; // the CPU ships none
  EXPECT_NE(r.out.find("Example plan"), std::string::npos) << r.out;
}

// A quantized weight dtype is named in the plan (the CPU reference's linear takes int4).
TEST(NinferInfo, PlansALinearOnQuantizedWeights) {
  const ProcessOutput r = run_info("--plan linear --tokens 1 --dims 64,32 --dtype int4");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("(dims 64x32, int4)"), std::string::npos) << r.out;
}

TEST(NinferInfo, ListOps) {
  const ProcessOutput r = run_info("--list-ops");
  ASSERT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("gdn_gating"), std::string::npos);
}

TEST(NinferInfo, BadInputGetsAClearErrorAndNonZeroExit) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--plan gdn_gating --device-model 'RTX 9999'", "unknown device model 'RTX 9999'"},
      {"--plan not_an_op", "unknown op 'not_an_op'"},
      {"--plugin-dir /nonexistent/plugins", "/nonexistent/plugins does not exist"},
      {"--plan gdn_gating --tokens 0", "--tokens must be >= 1"},
      {"--plan gdn_gating --dims 1,2,3", "--dims for gdn_gating takes 2 values"},
      {"--plan gdn_gating --dtype int3", "unknown --dtype 'int3'"},
      {"--plan gdn_gating --dtype int4", "no variant of 'gdn_gating' in plugin cpu"},
      {"--no-such-flag", "no-such-flag"},
      {"--plan gdn_gating --device cuda:x", "expected auto, cpu, cuda or cuda:N"},
      {"--plan gdn_gating --device gpu", "expected auto, cpu, cuda or cuda:N"},
  };
  for (const auto& [args, want] : cases) {
    const ProcessOutput r = run_info(args, true);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_NE(r.out.find(want), std::string::npos) << args << " printed: " << r.out;
  }
}

TEST(NinferInfo, ForcedPluginOfAnotherArchitectureSaysWhy) {
  if (cuda_plugins().empty()) GTEST_SKIP() << "build has no CUDA plugins";
  const ProcessOutput r = run_info("--plan gdn_gating --device-model H200 --plugin cuda-sm120a", true);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("no plugin can run on H200: built for sm_120a (compute 12.0), device is compute 9.0"),
            std::string::npos)
      << r.out;
}
