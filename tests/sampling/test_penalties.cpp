// Repetition (HF) and presence/frequency (OpenAI) penalties change exactly the logits their
// formulas say, by exactly the amounts they say.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <vector>

#include "ninfer/support/error.hpp"
#include "ninfer/sampling/logits_processing.hpp"
#include "test_support.hpp"

namespace ninfer::test {
namespace {

TEST(SamplingPenalties, MatchTheFormulasOnRandomHistories) {
  auto rng = fresh_rng("SamplingPenalties.MatchTheFormulasOnRandomHistories");
  std::normal_distribution<double> logit(0.0, 3.0);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int trial = 0; trial < 50; ++trial) {
    const int32_t vocab = 64 + static_cast<int32_t>(u(rng) * 500);
    std::vector<float> logits(vocab);
    for (float& l : logits) l = static_cast<float>(logit(rng));
    logits[0] = 0.0f; // zero is neither positive nor negative: HF divides it (stays 0)
    std::uniform_int_distribution<int32_t> id(0, vocab - 1);
    std::vector<int32_t> prompt, generated;
    for (int i = 0; i < 40; ++i) prompt.push_back(id(rng) % 50); // repeats on purpose
    for (int i = 0; i < 40; ++i) generated.push_back(id(rng) % 80);
    prompt.push_back(0);
    const double rep = 0.5 + 2.0 * u(rng);
    const double presence = -2.0 + 4.0 * u(rng);
    const double frequency = -2.0 + 4.0 * u(rng);

    TokenHistory history(prompt);
    for (int32_t g : generated) history.add_generated(g);
    std::vector<float> got = logits;
    apply_repetition_penalty(got, history, rep);
    apply_presence_frequency_penalties(got, history, presence, frequency);

    std::set<int32_t> seen(prompt.begin(), prompt.end());
    seen.insert(generated.begin(), generated.end());
    std::map<int32_t, int> count;
    for (int32_t g : generated) ++count[g];
    for (int32_t i = 0; i < vocab; ++i) {
      double want = logits[i];
      if (seen.count(i)) want = want < 0 ? want * rep : want / rep; // once per distinct id
      if (count.count(i)) want -= count[i] * frequency + presence;
      if (!seen.count(i)) {
        EXPECT_EQ(got[i], logits[i]) << "token " << i << " is not in the history";
      } else {
        EXPECT_NEAR(got[i], want, 1e-6 + 1e-6 * std::fabs(want)) << "token " << i;
      }
    }
  }
}

TEST(SamplingPenalties, RepetitionCoversPromptPresenceAndFrequencyOnlyOutput) {
  std::vector<float> logits = {2.0f, -2.0f, 2.0f, -2.0f, 2.0f};
  TokenHistory history(std::vector<int32_t>{0, 1, 0});
  history.add_generated(2);
  history.add_generated(2);
  std::vector<float> rep = logits;
  apply_repetition_penalty(rep, history, 2.0);
  EXPECT_EQ(rep, (std::vector<float>{1.0f, -4.0f, 1.0f, -2.0f, 2.0f}));
  std::vector<float> pf = logits;
  apply_presence_frequency_penalties(pf, history, 0.5, 0.25);
  // Token 2: generated twice -> 2 - (2 * 0.25 + 0.5) = 1. Prompt tokens 0, 1 untouched.
  EXPECT_EQ(pf, (std::vector<float>{2.0f, -2.0f, 1.0f, -2.0f, 2.0f}));
}

TEST(SamplingPenalties, AnIdOutsideTheVocabularyIsAnError) {
  std::vector<float> logits(4, 0.0f);
  TokenHistory history(std::vector<int32_t>{7});
  EXPECT_THROW(apply_repetition_penalty(logits, history, 1.1), Error);
  history.add_generated(-1);
  EXPECT_THROW(apply_presence_frequency_penalties(logits, history, 0.1, 0.0), Error);
}

} // namespace
} // namespace ninfer::test
