// The serving engine on the CPU plugin: continuous batching must not change what a sequence
// generates. Greedy ids are compared with transformers' (tests/fixtures/tiny-qwen3), up to the
// first step whose reference top-2 margin is small enough to flip on rounding.
#include <gtest/gtest.h>

#include "../models/model_test_env.hpp"
#include "ninfer/serving/engine.hpp"

using namespace ninfer;
using namespace ninfer::serving;
using namespace ninfer::test;

namespace {

std::unique_ptr<CausalLM> model(Backend& be, const Fixture& fx, int32_t slots, int64_t ctx = 256, int32_t chunk = 7) {
  ModelOptions o;
  o.max_context = ctx;
  o.max_sequences = slots;
  o.prefill_chunk = chunk;
  return CausalLM::load(fx.checkpoint, be, o);
}

GenerationRequest greedy(const std::vector<int32_t>& prompt, int64_t max_new) {
  GenerationRequest r;
  r.prompt_ids = prompt;
  r.sampling.temperature = 0;
  r.max_new_tokens = max_new;
  return r;
}

// Steps of the reference that must match exactly (before the first near-tie).
size_t trusted_steps(const FixtureCase& c) {
  size_t n = 0;
  while (n < c.greedy.size() && c.margin[n] > kGreedyMargin) ++n;
  return n;
}

} // namespace

TEST(ServingEngine, BatchedGreedyMatchesTransformersWithMoreRequestsThanSlots) {
  const Fixture fx = Fixture::load("tiny-qwen3");
  Backend be = cpu_model_backend();
  auto lm = model(be, fx, 2); // three requests, two slots: the third joins when one finishes
  Engine engine(*lm, nullptr, {8});
  std::vector<std::shared_ptr<RequestHandle>> handles;
  // Different lengths so sequences finish at different steps and slots are reused mid-run.
  const int64_t lengths[] = {24, 9, 17};
  for (size_t i = 0; i < fx.cases.size(); ++i)
    handles.push_back(engine.submit(greedy(fx.cases[i].prompt, lengths[i])));
  for (size_t i = 0; i < fx.cases.size(); ++i) {
    const ServeResult r = handles[i]->wait();
    EXPECT_EQ(r.finish_reason, "length") << r.error;
    ASSERT_EQ(r.generated_ids.size(), static_cast<size_t>(lengths[i]));
    EXPECT_EQ(r.prompt_tokens, static_cast<int64_t>(fx.cases[i].prompt.size()));
    const size_t n = std::min<size_t>(trusted_steps(fx.cases[i]), lengths[i]);
    EXPECT_GT(n, 0u);
    for (size_t s = 0; s < n; ++s) EXPECT_EQ(r.generated_ids[s], fx.cases[i].greedy[s]) << "case " << i << " step " << s;
  }
}

TEST(ServingEngine, StopTokenEndsTheSequenceWithoutEmittingIt) {
  const Fixture fx = Fixture::load("tiny-qwen3");
  Backend be = cpu_model_backend();
  auto lm = model(be, fx, 1);
  Engine engine(*lm, nullptr);
  const FixtureCase& c = fx.cases[0];
  ASSERT_GT(trusted_steps(c), 6u);
  // The first step at which the reference produces greedy[5]: generation must end just before it.
  size_t first = 0;
  while (c.greedy[first] != c.greedy[5]) ++first;
  GenerationRequest r = greedy(c.prompt, 24);
  r.stop.token_ids.insert(c.greedy[5]);
  const ServeResult res = engine.submit(r)->wait();
  EXPECT_EQ(res.finish_reason, "stop");
  EXPECT_EQ(res.generated_ids, std::vector<int32_t>(c.greedy.begin(), c.greedy.begin() + first));
}

TEST(ServingEngine, GenerationEndsWhenTheContextIsFull) {
  const Fixture fx = Fixture::load("tiny-qwen3");
  Backend be = cpu_model_backend();
  auto lm = model(be, fx, 1, 16);
  Engine engine(*lm, nullptr);
  const FixtureCase& c = fx.cases[1]; // 9 prompt tokens
  const ServeResult res = engine.submit(greedy(c.prompt, 100))->wait();
  EXPECT_EQ(res.finish_reason, "length");
  // Positions 0..15: the prompt plus generated tokens fed back, plus the last one sampled.
  EXPECT_EQ(res.generated_ids.size(), 16u - c.prompt.size());
}

TEST(ServingEngine, RefusesWhatItCannotServe) {
  const Fixture fx = Fixture::load("tiny-qwen3");
  Backend be = cpu_model_backend();
  auto lm = model(be, fx, 1, 4096);
  Engine engine(*lm, nullptr, {0}); // no queue: only as many requests as slots
  auto busy = engine.submit(greedy({1, 2, 3}, 4000));
  EXPECT_THROW(engine.submit(greedy({1, 2, 3}, 4)), QueueFull);
  busy->cancel();
  busy->wait();
  EXPECT_THROW(engine.submit(greedy(std::vector<int32_t>(4096, 1), 4)), PromptTooLong);
  EXPECT_THROW(engine.submit(greedy({}, 4)), Error);
  EXPECT_THROW(engine.submit(greedy({static_cast<int32_t>(fx.vocab)}, 4)), Error);
  EXPECT_THROW(engine.submit(greedy({1}, -1)), Error);
  GenerationRequest bad = greedy({1}, 4);
  bad.sampling.top_p = 2;
  EXPECT_THROW(engine.submit(bad), Error);
  // Still serving after the refusals.
  EXPECT_EQ(engine.submit(greedy(fx.cases[1].prompt, 3))->wait().generated_ids.size(), 3u);
  // No token asked: the prompt is read (and scored, when asked) and nothing is generated.
  GenerationRequest score = greedy(fx.cases[1].prompt, 0);
  score.prompt_logprobs = 1;
  const ServeResult scored = engine.submit(score)->wait();
  EXPECT_EQ(scored.finish_reason, "length");
  EXPECT_TRUE(scored.generated_ids.empty());
  EXPECT_EQ(scored.prompt_logprobs.size(), fx.cases[1].prompt.size() - 1);
  EXPECT_EQ(scored.prompt_top_logprobs.size(), fx.cases[1].prompt.size());
}

TEST(ServingEngine, CancelledRequestStopsEarlyAndFreesItsSlot) {
  const Fixture fx = Fixture::load("tiny-qwen3");
  Backend be = cpu_model_backend();
  auto lm = model(be, fx, 1, 4096);
  Engine engine(*lm, nullptr);
  auto h = engine.submit(greedy(fx.cases[0].prompt, 4000));
  h->cancel();
  const ServeResult r = h->wait();
  EXPECT_EQ(r.finish_reason, "cancelled");
  EXPECT_LT(r.generated_ids.size(), 4000u);
  // The only slot is free again: the next request runs to its end.
  const ServeResult next = engine.submit(greedy(fx.cases[1].prompt, 5))->wait();
  EXPECT_EQ(next.finish_reason, "length");
  EXPECT_EQ(next.generated_ids.size(), 5u);
}

TEST(ServingEngine, ShutdownCancelsQueuedRequests) {
  const Fixture fx = Fixture::load("tiny-qwen3");
  Backend be = cpu_model_backend();
  auto lm = model(be, fx, 1, 4096);
  Engine engine(*lm, nullptr);
  auto running = engine.submit(greedy(fx.cases[0].prompt, 4000));
  auto queued = engine.submit(greedy(fx.cases[1].prompt, 4));
  engine.shutdown(true);
  EXPECT_EQ(running->wait().finish_reason, "cancelled");
  EXPECT_EQ(queued->wait().finish_reason, "cancelled");
  EXPECT_THROW(engine.submit(greedy(fx.cases[1].prompt, 4)), QueueFull);
}

// Engine::cancel on a queued request gives its queue place back at once (not at the next
// scheduler step): the request is finished as cancelled before cancel returns, and another
// request fits into the queue straight away.
TEST(ServingEngine, CancellingAQueuedRequestFreesItsPlaceAtOnce) {
  const Fixture fx = Fixture::load("tiny-qwen3");
  Backend be = cpu_model_backend();
  auto lm = model(be, fx, 1, 4096);
  Engine engine(*lm, nullptr, {1}); // one slot, one queue place
  auto running = engine.submit(greedy(fx.cases[0].prompt, 4000));
  auto queued = engine.submit(greedy(fx.cases[1].prompt, 4));
  EXPECT_THROW(engine.submit(greedy({1, 2, 3}, 4)), QueueFull);
  engine.cancel(*queued);
  const auto r = queued->wait_for(std::chrono::milliseconds(0));
  ASSERT_TRUE(r.has_value()) << "the queued request was not finished by cancel";
  EXPECT_EQ(r->finish_reason, "cancelled");
  EXPECT_TRUE(r->generated_ids.empty());
  auto next = engine.submit(greedy({1, 2, 3}, 3)); // the freed place, while the slot is still busy
  engine.cancel(*running);
  EXPECT_EQ(running->wait().finish_reason, "cancelled");
  EXPECT_EQ(next->wait().generated_ids.size(), 3u);
}
