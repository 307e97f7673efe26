// CausalLM::queue_step / next_result: steps queued ahead of the host, each row fed on the backend
// by its slot's previous pick. Against the transformers fixtures' greedy ids, against steps read
// one at a time, with rows that change between steps, and the API's errors (which leave the
// model usable).
#include <gtest/gtest.h>

#include <map>

#include "model_test_env.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/generation/generate.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

// Rows fed by the host's ids (one per slot), and rows fed by each slot's last pick.
std::vector<StepRow> host_rows(const std::vector<int32_t>& slots, const std::vector<int32_t>& ids,
                               std::span<const RowSampling> sampling = {}) {
  std::vector<StepRow> rows;
  for (size_t i = 0; i < slots.size(); ++i) {
    rows.push_back({.slot = slots[i], .ids = std::span(&ids[i], 1)});
    if (!sampling.empty()) rows.back().sampling = sampling[i];
  }
  return rows;
}
std::vector<StepRow> chained_rows(const std::vector<int32_t>& slots, std::span<const RowSampling> sampling = {}) {
  std::vector<StepRow> rows;
  for (size_t i = 0; i < slots.size(); ++i) {
    rows.push_back({.slot = slots[i]});
    if (!sampling.empty()) rows.back().sampling = sampling[i];
  }
  return rows;
}

} // namespace

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
    lm->queue_step(host_rows(slots, first)); // picks greedy id 1 from id 0
    for (size_t j = 1; j < steps; ++j) {
      if (j + 1 < steps) lm->queue_step(chained_rows(slots)); // picks id j + 1 from id j, on the backend
      const std::vector<int32_t> got = lm->next_result().ids;
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

// Sampled steps in flight draw what steps read one at a time draw on a second copy of the model
// (same rows, same draw numbers), ids and log-probabilities alike.
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
  queued->queue_step(host_rows(slots, cur, rows(1)));
  for (int step = 1; step <= kSteps; ++step) {
    if (step < kSteps) queued->queue_step(chained_rows(slots, rows(static_cast<uint64_t>(step + 1))));
    const StepResult got = queued->next_result();
    std::vector<float> want_lp;
    const std::vector<int32_t> want = decode_picks(*stepped, slots, cur, rows(static_cast<uint64_t>(step)), &want_lp);
    ASSERT_EQ(got.ids, want) << "step " << step;
    for (size_t i = 0; i < 2; ++i) EXPECT_NEAR(got.logprobs[i], want_lp[i], 1e-6) << "step " << step << " row " << i;
    cur = got.ids;
  }
  EXPECT_EQ(queued->position(1), stepped->position(1));
}

// Sequences join, leave and change places between chained steps (as in a server): every row
// still takes its own slot's last pick, so each slot's ids equal that slot decoded alone, step
// by step with host ids, on a second copy of the model. A slot that sat steps out continues from
// its last pick, three steps back.
TEST(QueuedDecode, RowsMayChangeBetweenChainedSteps) {
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  Backend be = cpu_model_backend();
  auto queued = fixture_model(be, fx, 512, 4), alone = fixture_model(be, fx, 512, 4);
  // The slots of each step; a slot's first appearance is fed by the host.
  const std::vector<std::vector<int32_t>> plan = {{0},       {0, 1},    {1, 0, 2}, {2, 1},
                                                  {1, 2, 3}, {3, 0, 1}, {0, 3},    {3}};
  std::map<int32_t, int32_t> first;
  for (int32_t s = 0; s < 4; ++s) {
    const auto& prompt = fx.cases[static_cast<size_t>(s) % fx.cases.size()].prompt;
    first[s] = argmax(queued->prefill(s, prompt));
    alone->prefill(s, prompt);
  }
  std::map<int32_t, std::vector<int32_t>> got, want; // per slot: the ids picked, in order
  std::map<int32_t, bool> started;
  for (size_t k = 0; k < plan.size(); ++k) {
    std::vector<StepRow> rows;
    for (int32_t s : plan[k]) {
      rows.push_back({.slot = s});
      if (!started[s]) rows.back().ids = std::span(&first[s], 1);
      started[s] = true;
    }
    queued->queue_step(rows);
    if (k > 0) { // read one step behind, as the engine loop does
      const StepResult r = queued->next_result();
      for (size_t i = 0; i < plan[k - 1].size(); ++i) got[plan[k - 1][i]].push_back(r.ids[i]);
    }
  }
  const StepResult r = queued->next_result();
  for (size_t i = 0; i < plan.back().size(); ++i) got[plan.back()[i]].push_back(r.ids[i]);
  for (int32_t s = 0; s < 4; ++s) {
    int32_t cur = first[s];
    for (size_t k = 0; k < got[s].size(); ++k) {
      cur = decode_picks(*alone, std::vector<int32_t>{s}, std::vector<int32_t>{cur})[0];
      want[s].push_back(cur);
    }
    EXPECT_EQ(got[s], want[s]) << "slot " << s;
    EXPECT_EQ(queued->position(s), alone->position(s)) << "slot " << s;
  }
}

TEST(QueuedDecode, MisuseIsAnErrorAndLeavesTheModelUsable) {
  const Fixture fx = Fixture::load("tiny-qwen3");
  Backend be = cpu_model_backend();
  auto lm = fixture_model(be, fx, 512, 3);
  const std::vector<int32_t> one = {0}, two = {0, 1}, ids = {5, 6};
  lm->prefill(0, fx.cases[0].prompt);
  lm->prefill(1, fx.cases[1].prompt);
  EXPECT_NE(error_of([&] { lm->next_result(); }).find("no queued step"), std::string::npos);
  EXPECT_NE(error_of([&] { lm->queue_step(chained_rows(one)); }).find("no queued pick"), std::string::npos)
      << "a slot just prefilled has no pick to chain from";
  lm->queue_step(host_rows(two, ids));
  lm->queue_step(chained_rows({1, 0}));  // another order is fine: each row takes its own slot's pick
  lm->queue_step(chained_rows(one));     // so is a subset
  lm->queue_step(chained_rows(two));
  EXPECT_EQ(lm->unread_results(), CausalLM::kMostUnreadResults);
  EXPECT_NE(error_of([&] { lm->queue_step(chained_rows(two)); }).find("not read"), std::string::npos);
  const int64_t at = lm->position(0);
  EXPECT_EQ(lm->next_result().ids.size(), 2u);
  lm->drop_results();
  EXPECT_NE(error_of([&] { lm->next_result(); }).find("no queued step"), std::string::npos);
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
