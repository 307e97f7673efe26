// CausalLM::queue_decode / next_picks: decode steps queued ahead of the host, each fed on the
// backend by the previous step's pick. Against the transformers fixtures' greedy ids, against
// step-by-step decode_sample, and the API's errors (which leave the model usable).
#include <gtest/gtest.h>

#include "model_test_env.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/generation/generate.hpp"

using namespace ninfer;
using namespace ninfer::test;

// All fixture cases decoded together, two steps always in flight: the ids the host reads are
// transformers' greedy ids wherever its top-2 margin is clear (a near-tie may flip; from there
// the case is not compared).
TEST(QueuedDecode, ChainedGreedyStepsReproduceTheReferenceIds) {
  for (const char* name : {"tiny-qwen3", "tiny-qwen3_5"}) {
    const Fixture fx = Fixture::load(name);
    Backend be = cpu_model_backend();
    auto lm = fixture_model(be, fx, 512, 3);
    const size_t n = std::min<size_t>(fx.cases.size(), 3);
    std::vector<int32_t> slots, first;
    size_t steps = SIZE_MAX;
    for (size_t i = 0; i < n; ++i) {
      slots.push_back(static_cast<int32_t>(i));
      first.push_back(argmax(lm->prefill(slots.back(), fx.cases[i].prompt)));
      steps = std::min(steps, fx.cases[i].greedy.size());
    }
    ASSERT_GE(steps, 3u) << name;
    std::vector<bool> diverged(n, false);
    for (size_t i = 0; i < n; ++i) diverged[i] = first[i] != fx.cases[i].greedy[0];
    lm->queue_decode(slots, first); // picks greedy id 1 from id 0
    for (size_t j = 1; j < steps; ++j) {
      if (j + 1 < steps) lm->queue_decode(slots, {}); // picks id j + 1 from id j, on the backend
      const std::vector<int32_t> got = lm->next_picks();
      ASSERT_EQ(got.size(), n);
      for (size_t i = 0; i < n; ++i) {
        if (diverged[i]) continue;
        if (got[i] != fx.cases[i].greedy[j]) {
          ASSERT_LE(fx.cases[i].margin[j], kGreedyMargin)
              << name << " case " << i << " step " << j << ": " << got[i] << ", reference " << fx.cases[i].greedy[j];
          diverged[i] = true;
        }
      }
    }
    EXPECT_EQ(std::count(diverged.begin(), diverged.end(), false), static_cast<long>(n))
        << name << ": every case flipped on a near-tie; nothing was compared to the end";
  }
}

// Sampled steps in flight draw what decode_sample draws one step at a time on a second copy of
// the model (same rows, same draw numbers), ids and log-probabilities alike.
TEST(QueuedDecode, ChainedSampledStepsDrawWhatStepByStepSamplingDraws) {
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  Backend be = cpu_model_backend();
  auto queued = fixture_model(be, fx, 512, 3), stepped = fixture_model(be, fx, 512, 3);
  const std::vector<int32_t> slots = {1, 0};
  std::vector<int32_t> cur(2);
  for (int32_t s = 0; s < 2; ++s) {
    cur[static_cast<size_t>(s)] = argmax(queued->prefill(slots[static_cast<size_t>(s)], fx.cases[s].prompt));
    stepped->prefill(slots[static_cast<size_t>(s)], fx.cases[s].prompt);
  }
  auto rows = [](uint64_t draw) {
    return std::vector<RowSampling>{{1.3, 0, 0.95, 0.0, 7, draw}, {0.8, 20, 1.0, 0.02, 8, draw}};
  };
  constexpr int kSteps = 10;
  queued->queue_decode(slots, cur, rows(1));
  for (int step = 1; step <= kSteps; ++step) {
    if (step < kSteps) queued->queue_decode(slots, {}, rows(static_cast<uint64_t>(step + 1)));
    std::vector<float> lp, want_lp;
    const std::vector<int32_t> got = queued->next_picks(&lp);
    const std::vector<int32_t> want = stepped->decode_sample(slots, cur, rows(static_cast<uint64_t>(step)), &want_lp);
    ASSERT_EQ(got, want) << "step " << step;
    for (size_t i = 0; i < 2; ++i) EXPECT_NEAR(lp[i], want_lp[i], 1e-6) << "step " << step << " row " << i;
    cur = got;
  }
  EXPECT_EQ(queued->position(1), stepped->position(1));
}

TEST(QueuedDecode, MisuseIsAnErrorAndLeavesTheModelUsable) {
  const Fixture fx = Fixture::load("tiny-qwen3");
  Backend be = cpu_model_backend();
  auto lm = fixture_model(be, fx, 512, 3);
  const std::vector<int32_t> one = {0}, two = {0, 1}, id = {5}, ids = {5, 6};
  lm->prefill(0, fx.cases[0].prompt);
  lm->prefill(1, fx.cases[1].prompt);
  EXPECT_NE(error_of([&] { lm->next_picks(); }).find("no queued decode step"), std::string::npos);
  EXPECT_NE(error_of([&] { lm->queue_decode(one, {}); }).find("previous step's picks"), std::string::npos);
  lm->queue_decode(two, ids);
  EXPECT_NE(error_of([&] { lm->queue_decode(std::vector<int32_t>{1, 0}, {}); }).find("same slots"), std::string::npos)
      << "a chained step must keep the slot order";
  EXPECT_NE(error_of([&] { lm->decode_greedy(one, id); }).find("not read"), std::string::npos);
  lm->queue_decode(two, {});
  EXPECT_NE(error_of([&] { lm->queue_decode(two, {}); }).find("not read"), std::string::npos);
  const int64_t at = lm->position(0);
  EXPECT_EQ(lm->next_picks().size(), 2u);
  lm->drop_queued();
  EXPECT_NE(error_of([&] { lm->next_picks(); }).find("no queued decode step"), std::string::npos);
  EXPECT_EQ(lm->position(0), at) << "a dropped step's token stays in its slot";
  // Usable: a fresh sequence still matches the reference.
  lm->reset(0);
  const auto& c = fx.cases[1];
  EXPECT_LE(max_abs_diff(lm->prefill(0, c.prompt, LogitsFor::All), c.prompt_logits), kFixtureLogitsF32);
}

// generate() keeps a step queued behind the token it reads; a stop token leaves that step to run
// and be dropped. The next request on the slot (a hybrid model: GDN state too) must not see it.
TEST(QueuedDecode, AStepDroppedAfterAStopTokenDoesNotReachTheNextRequest) {
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  Backend be = cpu_model_backend();
  auto lm = fixture_model(be, fx, 512, 3), fresh = fixture_model(be, fx, 512, 3);
  GenerationRequest req;
  req.prompt_ids = fx.cases[0].prompt;
  req.max_new_tokens = 12;
  req.sampling.temperature = 0; // greedy: the same tokens every time
  const GenerationResult full = generate(*lm, 0, nullptr, req);
  ASSERT_EQ(full.generated_ids.size(), 12u);
  GenerationRequest stopping = req;
  stopping.stop.token_ids = {full.generated_ids[3]};
  const GenerationResult stopped = generate(*lm, 0, nullptr, stopping);
  EXPECT_EQ(stopped.finish_reason, "stop");
  req.prompt_ids = fx.cases[1].prompt;
  const GenerationResult after = generate(*lm, 0, nullptr, req);
  const GenerationResult want = generate(*fresh, 0, nullptr, req);
  EXPECT_EQ(after.generated_ids, want.generated_ids);
  EXPECT_EQ(after.generated_logprobs, want.generated_logprobs);
}
