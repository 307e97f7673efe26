// The quantized fixtures (tests/fixtures/quant/: GPTQ, GPTQ act-order, AWQ, compressed-tensors,
// FP8 block) against their dequantized float32 twins, on the CPU plugin: the same random prompts
// prefilled and decoded greedily on both give the same greedy ids at every step and the twin's
// top log-probabilities within 1e-4 (the fixtures README: dequantization is exact in float32, so
// a loader that reads the layout right computes the twin's model). The twins themselves are
// ordinary float checkpoints whose float path the transformers fixtures cover.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "model_test_env.hpp"
#include "ninfer/checkpoint/expected_tensors.hpp"
#include "ninfer/checkpoint/quantized_tensors.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

// Twin and quantized model compute the same float32 weights; the CPU plugin multiplies both
// with the same kernel, so their log-probabilities agree far inside this (the README's bound).
constexpr Tolerance kQuantTwinLogprob{"quantized-vs-dequantized-twin-logprob", 1e-4, 0};
constexpr int kTopLogprobs = 5;
constexpr int kPrompts = 3;
constexpr int kDecodeSteps = 12;

struct QuantFixture {
  const char* name;
  QuantMethod method;
};

void PrintTo(const QuantFixture& f, std::ostream* os) { *os << f.name; }

std::vector<double> log_softmax(const std::vector<float>& logits) {
  const double mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float v : logits) sum += std::exp(double(v) - mx);
  const double lse = mx + std::log(sum);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = double(logits[i]) - lse;
  return out;
}

class QuantFixtureTest : public testing::TestWithParam<QuantFixture> {};

// The twin's top log-probabilities, looked up in the quantized model's row.
void expect_same_top_logprobs(const std::vector<float>& quantized, const std::vector<float>& twin,
                              const std::string& where) {
  const auto q = log_softmax(quantized), t = log_softmax(twin);
  std::vector<int32_t> order(t.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + kTopLogprobs, order.end(), [&](int32_t a, int32_t b) { return t[a] > t[b]; });
  for (int i = 0; i < kTopLogprobs; ++i) {
    const int32_t id = order[static_cast<size_t>(i)];
    EXPECT_LE(std::fabs(q[id] - t[id]), kQuantTwinLogprob.abs)
        << where << ": token " << id << " (top " << i << ") log-prob " << q[id] << ", twin " << t[id] << " ("
        << kQuantTwinLogprob.name << ")";
  }
}

ModelOptions fixture_options() {
  ModelOptions o;
  o.max_context = 256;
  o.max_sequences = kPrompts;
  o.weights = WeightPrecision::F32;
  o.kv_cache = KvCachePrecision::F32;
  return o;
}

// Random prompts prefilled on both models, then greedy decode steps: the same ids at every
// step, the twin's top log-probabilities at every row.
void expect_twin_outputs(CausalLM& q_lm, CausalLM& t_lm, int64_t vocab, const char* what) {
  auto rng = fresh_rng(what);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab) - 1);
  for (int32_t slot = 0; slot < kPrompts; ++slot) {
    std::vector<int32_t> prompt(static_cast<size_t>(5 + 9 * slot));
    for (auto& id : prompt) id = token(rng);
    const auto q_rows = q_lm.prefill(slot, prompt, LogitsFor::All);
    const auto t_rows = t_lm.prefill(slot, prompt, LogitsFor::All);
    for (int64_t r = 0; r < static_cast<int64_t>(prompt.size()); ++r)
      expect_same_top_logprobs(row(q_rows, r, vocab), row(t_rows, r, vocab), fmt::format("prompt {} row {}", slot, r));
    std::vector<float> q_last = row(q_rows, static_cast<int64_t>(prompt.size()) - 1, vocab);
    std::vector<float> t_last = row(t_rows, static_cast<int64_t>(prompt.size()) - 1, vocab);
    for (int step = 0; step < kDecodeSteps; ++step) {
      const int32_t q_id = argmax(q_last), t_id = argmax(t_last);
      ASSERT_EQ(q_id, t_id) << "prompt " << slot << " greedy step " << step;
      q_last = q_lm.decode(std::vector<int32_t>{slot}, std::vector<int32_t>{q_id});
      t_last = t_lm.decode(std::vector<int32_t>{slot}, std::vector<int32_t>{t_id});
      expect_same_top_logprobs(q_last, t_last, fmt::format("prompt {} decode step {}", slot, step));
      if (testing::Test::HasFailure()) return;
    }
  }
}

TEST_P(QuantFixtureTest, GivesItsDequantizedTwinsOutputs) {
  const auto dir = fixtures_dir() / "quant" / GetParam().name;
  const Checkpoint quantized = Checkpoint::open(dir / "quantized");
  const Checkpoint twin = Checkpoint::open(dir / "twin");
  ASSERT_TRUE(quantized.config().quantization.has_value());
  EXPECT_EQ(quantized.config().quantization->method, GetParam().method);
  EXPECT_FALSE(twin.config().quantization.has_value());
  EXPECT_TRUE(unrecognised_tensors(quantized).empty()) << "every packed tensor belongs to a projection";

  Backend be = cpu_model_backend();
  auto q_lm = CausalLM::load(quantized, be, fixture_options());
  const size_t weights_after_quantized = be.memory().in_use[static_cast<size_t>(MemoryUse::Weights)];
  const auto formats = be.memory().weights_by_format;
  auto t_lm = CausalLM::load(twin, be, fixture_options());
  const size_t twin_weights = be.memory().in_use[static_cast<size_t>(MemoryUse::Weights)] - weights_after_quantized;
  EXPECT_LT(weights_after_quantized, twin_weights) << "the quantized projections stay packed on the backend";
  const bool has_quantized_format = std::any_of(formats.begin(), formats.end(), [&](const auto& f) {
    return f.first.rfind(quant_method_name(GetParam().method), 0) == 0;
  });
  EXPECT_TRUE(has_quantized_format) << "the memory budget counts the quantized weights by format: "
                                    << be.memory().describe();
  expect_twin_outputs(*q_lm, *t_lm, quantized.config().vocab_size, "quantized fixture prompts");
}

// The plugin without the fused ops (cpu-unfused): norm_linear runs as rms_norm and linear, and
// the quantized weights' description must reach that linear.
TEST_P(QuantFixtureTest, GivesItsTwinsOutputsThroughTheUnfusedForms) {
  PluginHost unfused_host;
  ASSERT_TRUE(unfused_host.load_file(NINFER_UNFUSED_PLUGIN_FILE)) << NINFER_UNFUSED_PLUGIN_FILE;
  const auto dir = fixtures_dir() / "quant" / GetParam().name;
  const Checkpoint quantized = Checkpoint::open(dir / "quantized");
  const Checkpoint twin = Checkpoint::open(dir / "twin");
  Backend be(*unfused_host.plugins().front(), host_device());
  auto q_lm = CausalLM::load(quantized, be, fixture_options());
  auto t_lm = CausalLM::load(twin, be, fixture_options());
  expect_twin_outputs(*q_lm, *t_lm, quantized.config().vocab_size, "quantized fixture prompts, unfused");
}

INSTANTIATE_TEST_SUITE_P(Quant, QuantFixtureTest,
                         testing::Values(QuantFixture{"tiny-qwen3-gptq4", QuantMethod::Gptq},
                                         QuantFixture{"tiny-qwen3_5-gptq4-actorder", QuantMethod::Gptq},
                                         QuantFixture{"tiny-qwen3-awq", QuantMethod::Awq},
                                         QuantFixture{"tiny-qwen3_5-ct-w4", QuantMethod::CompressedTensors},
                                         QuantFixture{"tiny-qwen3-fp8", QuantMethod::Fp8Block}),
                         [](const testing::TestParamInfo<QuantFixture>& p) {
                           std::string n = p.param.name;
                           for (auto& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

} // namespace
