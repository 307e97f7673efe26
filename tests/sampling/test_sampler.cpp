// The per-sequence sampler: greedy is the argmax (lowest id on ties), logprobs are the raw
// log_softmax, a seed replays the same tokens, and each sequence's PRNG is its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "ninfer/support/error.hpp"
#include "ninfer/sampling/sampler.hpp"
#include "test_support.hpp"

namespace ninfer::test {
namespace {

std::vector<std::vector<float>> random_rows(std::mt19937_64& rng, size_t rows, size_t vocab) {
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<std::vector<float>> out(rows, std::vector<float>(vocab));
  for (auto& r : out)
    for (float& v : r) v = d(rng);
  return out;
}

SamplingParams sampling(double t, int64_t k, double p, double m, uint64_t seed) {
  SamplingParams s;
  s.temperature = t;
  s.top_k = k;
  s.top_p = p;
  s.min_p = m;
  s.seed = seed;
  return s;
}

TEST(Sampler, GreedyIsTheArgmaxWithTiesToTheLowestId) {
  auto rng = fresh_rng("Sampler.GreedyIsTheArgmaxWithTiesToTheLowestId");
  std::uniform_int_distribution<int> small(-3, 3); // few distinct values: many ties
  SamplingParams greedy;
  greedy.temperature = 0.0;
  greedy.top_k = 5; // filters do not apply to greedy
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> logits(1 + trial % 97);
    for (float& v : logits) v = static_cast<float>(small(rng));
    int32_t want = 0;
    for (size_t i = 1; i < logits.size(); ++i)
      if (logits[i] > logits[want]) want = static_cast<int32_t>(i);
    Sampler s(greedy, {});
    EXPECT_EQ(s.sample(logits).token, want);
    EXPECT_EQ(argmax(logits), want);
  }
}

TEST(Sampler, GreedyUsesThePenalisedLogits) {
  // Token 1 wins on raw logits; after a repetition penalty of 2 on it (it is in the prompt),
  // 3.0 / 2 = 1.5 < 2.0, so token 0 wins.
  SamplingParams greedy;
  greedy.temperature = 0.0;
  greedy.repetition_penalty = 2.0;
  Sampler s(greedy, std::vector<int32_t>{1});
  const std::vector<float> logits = {2.0f, 3.0f, -1.0f};
  const SampleResult r = s.sample(logits);
  EXPECT_EQ(r.token, 0);
  // The reported logprob is the raw model's, not the penalised one.
  const double lse = std::log(std::exp(2.0) + std::exp(3.0) + std::exp(-1.0));
  EXPECT_NEAR(r.logprob, 2.0 - lse, 1e-6);
}

// A logit bias moves the pick as adding it to the logits does (the oracle: the argmax of the
// biased row, in float64), before the penalties; logprobs stay the raw model's.
TEST(Sampler, LogitBiasIsAddedBeforeThePick) {
  auto rng = fresh_rng("Sampler.LogitBiasIsAddedBeforeThePick");
  std::uniform_real_distribution<double> bias(-100.0, 100.0);
  for (int trial = 0; trial < 100; ++trial) {
    const size_t vocab = 2 + static_cast<size_t>(rng() % 500);
    const std::vector<float> logits = random_rows(rng, 1, vocab)[0];
    SamplingParams greedy;
    greedy.temperature = 0.0;
    std::vector<double> biased(logits.begin(), logits.end());
    for (int e = 0; e < 1 + trial % 5; ++e) {
      const auto id = static_cast<TokenId>(rng() % vocab);
      if (std::any_of(greedy.logit_bias.begin(), greedy.logit_bias.end(), [&](auto& b) { return b.first == id; })) continue;
      const double b = trial % 3 == 0 ? (e % 2 ? 100.0 : -100.0) : bias(rng);
      greedy.logit_bias.emplace_back(id, b);
      biased[id] += b;
    }
    const auto want = static_cast<TokenId>(std::max_element(biased.begin(), biased.end()) - biased.begin());
    Sampler s(greedy, {});
    const SampleResult r = s.sample(logits);
    EXPECT_EQ(r.token, want) << "trial " << trial;
    double m = *std::max_element(logits.begin(), logits.end()), sum = 0;
    for (float l : logits) sum += std::exp(double(l) - m);
    EXPECT_NEAR(r.logprob, double(logits[r.token]) - m - std::log(sum), 1e-5) << "the raw model's logprob";
  }
  // Before the repetition penalty: token 1 (in the prompt) biased 3 -> 4, then halved to 2 < 2.5.
  SamplingParams p;
  p.temperature = 0.0;
  p.repetition_penalty = 2.0;
  p.logit_bias = {{1, 3.0}};
  Sampler s(p, std::vector<int32_t>{1});
  EXPECT_EQ(s.sample(std::vector<float>{2.5f, 1.0f}).token, 0);
  // -100 keeps a token out of a sampled distribution in practice: 10,000 draws never take it.
  SamplingParams hot;
  hot.temperature = 1.0;
  hot.seed = 7;
  hot.logit_bias = {{2, -100.0}};
  Sampler h(hot, {});
  for (int i = 0; i < 10000; ++i) ASSERT_NE(h.next(std::vector<float>{0.0f, 0.0f, 5.0f}).token, 2);
  // An id past the row is an error, not a write past it.
  SamplingParams far;
  far.logit_bias = {{3, 1.0}};
  Sampler f(far, {});
  EXPECT_THROW(f.sample(std::vector<float>{0.0f, 0.0f, 0.0f}), Error);
}

TEST(Sampler, LogprobsAreTheRawLogSoftmax) {
  auto rng = fresh_rng("Sampler.LogprobsAreTheRawLogSoftmax");
  for (const size_t vocab : {1u, 5u, 300u, 4000u}) {
    for (const auto& logits : random_rows(rng, 5, vocab)) {
      SamplingParams p = sampling(0.8, 10, 0.9, 0.0, rng());
      p.repetition_penalty = 1.3;
      p.top_logprobs = 7;
      Sampler s(p, std::vector<int32_t>{0});
      const SampleResult r = s.sample(logits);

      double m = *std::max_element(logits.begin(), logits.end()), sum = 0;
      for (float l : logits) sum += std::exp(double(l) - m);
      std::vector<double> want(vocab);
      for (size_t i = 0; i < vocab; ++i) want[i] = double(logits[i]) - m - std::log(sum);

      EXPECT_NEAR(r.logprob, want[r.token], 1e-5 + 1e-6 * std::fabs(want[r.token]));
      std::vector<int32_t> order(vocab);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return want[a] > want[b]; });
      ASSERT_EQ(r.top_logprobs.size(), std::min<size_t>(7, vocab));
      for (size_t i = 0; i < r.top_logprobs.size(); ++i) {
        EXPECT_EQ(r.top_logprobs[i].id, order[i]);
        EXPECT_TRUE(std::isfinite(r.top_logprobs[i].logprob));
        EXPECT_NEAR(r.top_logprobs[i].logprob, want[order[i]], 1e-5 + 1e-6 * std::fabs(want[order[i]]));
      }
    }
  }
}

TEST(Sampler, TopLogprobTiesGoToTheLowerId) {
  SamplingParams p;
  p.temperature = 0.0;
  p.top_logprobs = 3;
  Sampler s(p, {});
  const std::vector<float> logits = {0.0f, 1.0f, 0.0f, 1.0f, 0.5f};
  const auto r = s.sample(logits);
  ASSERT_EQ(r.top_logprobs.size(), 3u);
  EXPECT_EQ(r.top_logprobs[0].id, 1);
  EXPECT_EQ(r.top_logprobs[1].id, 3);
  EXPECT_EQ(r.top_logprobs[2].id, 4);
}

std::vector<int32_t> run(Sampler& s, const std::vector<std::vector<float>>& rows) {
  std::vector<int32_t> ids;
  for (const auto& r : rows) ids.push_back(s.next(r).token);
  return ids;
}

TEST(Sampler, SameSeedSameTokens) {
  auto rng = fresh_rng("Sampler.SameSeedSameTokens");
  const auto rows = random_rows(rng, 300, 1000);
  SamplingParams p = sampling(1.0, 0, 0.95, 0.01, rng());
  p.presence_penalty = 0.3; // history-dependent, so the replay must track it too
  const std::vector<int32_t> prompt = {1, 2, 3};
  Sampler a(p, prompt), b(p, prompt);
  const auto ids_a = run(a, rows);
  EXPECT_EQ(ids_a, run(b, rows));

  SamplingParams other = p;
  other.seed = *p.seed + 1;
  Sampler c(other, prompt);
  EXPECT_NE(ids_a, run(c, rows)) << "a different seed drew the same 300 tokens";

  // Without a seed, the sampler reports the one it drew, and that seed replays the run.
  SamplingParams unseeded = p;
  unseeded.seed.reset();
  Sampler d(unseeded, prompt);
  const auto ids_d = run(d, rows);
  unseeded.seed = d.seed();
  Sampler e(unseeded, prompt);
  EXPECT_EQ(ids_d, run(e, rows));
}

TEST(Sampler, EachSequenceOwnsItsRandomState) {
  auto rng = fresh_rng("Sampler.EachSequenceOwnsItsRandomState");
  const auto rows = random_rows(rng, 200, 50);
  const SamplingParams p = sampling(1.2, 0, 1.0, 0.0, rng());
  Sampler alone(p, {});
  const auto want = run(alone, rows);
  // Interleave with another sequence drawing from the same kind of generator.
  Sampler a(p, {}), noise(sampling(1.0, 0, 1.0, 0.0, rng()), {});
  std::vector<int32_t> got;
  for (const auto& r : rows) {
    noise.next(r);
    got.push_back(a.next(r).token);
    noise.next(r);
  }
  EXPECT_EQ(got, want);
}

TEST(Sampler, RejectsOutOfRangeParametersNamingTheField) {
  auto expect_error = [](SamplingParams p, const std::string& field) {
    try {
      Sampler s(p, {});
      ADD_FAILURE() << field << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  SamplingParams p;
  p.temperature = -0.1;
  expect_error(p, "temperature");
  p = {};
  p.temperature = NAN;
  expect_error(p, "temperature");
  p = {};
  p.top_p = 0.0;
  expect_error(p, "top_p");
  p = {};
  p.top_p = 1.5;
  expect_error(p, "top_p");
  p = {};
  p.top_k = -1;
  expect_error(p, "top_k");
  p = {};
  p.min_p = 1.5;
  expect_error(p, "min_p");
  p = {};
  p.repetition_penalty = 0.0;
  expect_error(p, "repetition_penalty");
  // Dividing by a penalty that rounds to 0 in float (or nearly) makes the logits infinite.
  for (double tiny_or_huge : {1e-300, 1e-3, 1e3, 1e300}) {
    p = {};
    p.repetition_penalty = tiny_or_huge;
    expect_error(p, "repetition_penalty");
  }
  p = {};
  p.presence_penalty = 3.0;
  expect_error(p, "presence_penalty");
  p = {};
  p.frequency_penalty = -2.5;
  expect_error(p, "frequency_penalty");
  for (double b : {100.5, -101.0, double(NAN), double(INFINITY)}) {
    p = {};
    p.logit_bias = {{3, b}};
    expect_error(p, "logit_bias");
  }
  p = {};
  p.logit_bias = {{-1, 1.0}};
  expect_error(p, "logit_bias");
}

// The extremes of the repetition penalty's range keep penalised logits finite and sampleable.
TEST(Sampler, RepetitionPenaltyAtItsBoundsKeepsLogitsFinite) {
  for (double penalty : {0.01, 100.0}) {
    SamplingParams p;
    p.repetition_penalty = penalty;
    p.top_logprobs = 2;
    const std::vector<TokenId> prompt{0, 1, 2};
    Sampler s(p, prompt);
    const std::vector<float> logits{-30.0f, 30.0f, 29.0f, 1.0f};
    const SampleResult r = s.sample(logits);
    EXPECT_GE(r.token, 0);
    EXPECT_LT(r.token, 4);
    EXPECT_TRUE(std::isfinite(r.logprob));
  }
}

TEST(Sampler, NaNLogitsAreAnErrorNotAToken) {
  Sampler s(sampling(1.0, 0, 1.0, 0.0, 1), {});
  EXPECT_THROW(s.sample(std::vector<float>{0.0f, NAN, 1.0f}), Error);
  SamplingParams g;
  g.temperature = 0.0;
  Sampler greedy(g, {});
  EXPECT_THROW(greedy.sample(std::vector<float>{0.0f, NAN, 1.0f}), Error);
}

} // namespace
} // namespace ninfer::test
