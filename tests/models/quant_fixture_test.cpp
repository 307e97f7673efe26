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
#include "quant_twin.hpp"
#include "ninfer/checkpoint/expected_tensors.hpp"
#include "ninfer/checkpoint/quantized_tensors.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

struct QuantFixture {
  const char* name;
  QuantMethod method;
};

void PrintTo(const QuantFixture& f, std::ostream* os) { *os << f.name; }

class QuantFixtureTest : public testing::TestWithParam<QuantFixture> {};

TEST_P(QuantFixtureTest, GivesItsDequantizedTwinsOutputs) {
  const auto dir = fixtures_dir() / "quant" / GetParam().name;
  const Checkpoint quantized = Checkpoint::open(dir / "quantized");
  const Checkpoint twin = Checkpoint::open(dir / "twin");
  ASSERT_TRUE(quantized.config().quantization.has_value());
  EXPECT_EQ(quantized.config().quantization->method, GetParam().method);
  EXPECT_FALSE(twin.config().quantization.has_value());
  EXPECT_TRUE(unrecognised_tensors(quantized).empty()) << "every packed tensor belongs to a projection";

  Backend be = cpu_model_backend();
  auto q_lm = CausalLM::load(quantized, be, quant_twin_options());
  const size_t weights_after_quantized = be.memory().in_use[static_cast<size_t>(MemoryUse::Weights)];
  const auto formats = be.memory().weights_by_format;
  auto t_lm = CausalLM::load(twin, be, quant_twin_options());
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
  auto q_lm = CausalLM::load(quantized, be, quant_twin_options());
  auto t_lm = CausalLM::load(twin, be, quant_twin_options());
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
