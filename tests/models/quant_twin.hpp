// A quantized model against its dequantized float32 twin on the CPU plugin: the checks shared
// by the published-layout fixtures (quant_fixture_test.cpp) and the round trip through
// ninfer-quantize (quantize_round_trip_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "model_test_env.hpp"

namespace ninfer::test {

// Twin and quantized model compute the same float32 weights; the CPU plugin multiplies both
// with the same kernel, so their log-probabilities agree far inside this (the README's bound).
constexpr Tolerance kQuantTwinLogprob{"quantized-vs-dequantized-twin-logprob", 1e-4, 0};
constexpr int kQuantTwinTopK = 5;
constexpr int kQuantTwinPrompts = 3;
constexpr int kQuantTwinDecodeSteps = 12;

inline std::vector<double> log_softmax(const std::vector<float>& logits) {
  const double mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float v : logits) sum += std::exp(double(v) - mx);
  const double lse = mx + std::log(sum);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = double(logits[i]) - lse;
  return out;
}

// The twin's top log-probabilities, looked up in the quantized model's row.
inline void expect_same_top_logprobs(const std::vector<float>& quantized, const std::vector<float>& twin,
                              const std::string& where) {
  const auto q = log_softmax(quantized), t = log_softmax(twin);
  std::vector<int32_t> order(t.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + kQuantTwinTopK, order.end(), [&](int32_t a, int32_t b) { return t[a] > t[b]; });
  for (int i = 0; i < kQuantTwinTopK; ++i) {
    const int32_t id = order[static_cast<size_t>(i)];
    EXPECT_LE(std::fabs(q[id] - t[id]), kQuantTwinLogprob.abs)
        << where << ": token " << id << " (top " << i << ") log-prob " << q[id] << ", twin " << t[id] << " ("
        << kQuantTwinLogprob.name << ")";
  }
}

inline ModelOptions quant_twin_options() {
  ModelOptions o;
  o.max_context = 256;
  o.max_sequences = kQuantTwinPrompts;
  o.weights = WeightPrecision::F32;
  o.kv_cache = KvCachePrecision::F32;
  return o;
}

// Random prompts prefilled on both models, then greedy decode steps: the same ids at every
// step, the twin's top log-probabilities at every row.
inline void expect_twin_outputs(CausalLM& q_lm, CausalLM& t_lm, int64_t vocab, const char* what) {
  auto rng = fresh_rng(what);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab) - 1);
  for (int32_t slot = 0; slot < kQuantTwinPrompts; ++slot) {
    std::vector<int32_t> prompt(static_cast<size_t>(5 + 9 * slot));
    for (auto& id : prompt) id = token(rng);
    const auto q_rows = q_lm.prefill(slot, prompt, LogitsFor::All);
    const auto t_rows = t_lm.prefill(slot, prompt, LogitsFor::All);
    for (int64_t r = 0; r < static_cast<int64_t>(prompt.size()); ++r)
      expect_same_top_logprobs(row(q_rows, r, vocab), row(t_rows, r, vocab), fmt::format("prompt {} row {}", slot, r));
    std::vector<float> q_last = row(q_rows, static_cast<int64_t>(prompt.size()) - 1, vocab);
    std::vector<float> t_last = row(t_rows, static_cast<int64_t>(prompt.size()) - 1, vocab);
    for (int step = 0; step < kQuantTwinDecodeSteps; ++step) {
      const int32_t q_id = argmax(q_last), t_id = argmax(t_last);
      ASSERT_EQ(q_id, t_id) << "prompt " << slot << " greedy step " << step;
      q_last = decode_logits(q_lm, std::vector<int32_t>{slot}, std::vector<int32_t>{q_id});
      t_last = decode_logits(t_lm, std::vector<int32_t>{slot}, std::vector<int32_t>{t_id});
      expect_same_top_logprobs(q_last, t_last, fmt::format("prompt {} decode step {}", slot, step));
      if (testing::Test::HasFailure()) return;
    }
  }
}

} // namespace ninfer::test
