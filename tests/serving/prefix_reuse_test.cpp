// Prompt reuse across requests in a slot (ninfer/serving/slot_reuse.hpp): the choice of a slot
// and what it reuses, then the engine on the CPU plugin, where a prompt read partly from a slot
// must generate what the same prompt read whole generates (and what transformers generated).
#include <gtest/gtest.h>

#include <vector>

#include "../models/model_test_env.hpp"
#include "ninfer/serving/engine.hpp"
#include "ninfer/serving/slot_reuse.hpp"

using namespace ninfer;
using namespace ninfer::serving;
using namespace ninfer::test;

namespace {

// Log-probabilities of the same ids after a prompt read whole and one read partly from a slot:
// the CPU plugin accumulates in float64, so only the prefill's chunk boundaries differ.
constexpr double kLogprobTolerance = 1e-4;

const std::vector<int32_t> kAll = {0, 1, 2, 3};

std::unique_ptr<CausalLM> model(Backend& be, const Fixture& fx, int32_t slots) {
  ModelOptions o;
  o.max_context = 256;
  o.max_sequences = slots;
  o.prefill_chunk = 7;
  return CausalLM::load(fx.checkpoint, be, o);
}

GenerationRequest greedy(std::vector<int32_t> prompt, int64_t max_new, int32_t top_logprobs = 0) {
  GenerationRequest r;
  r.prompt_ids = std::move(prompt);
  r.sampling.temperature = 0;
  r.sampling.top_logprobs = top_logprobs;
  r.max_new_tokens = max_new;
  return r;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// `warm` (a next turn read partly from a slot) against the same request on a fresh engine without
// prompt reuse: nothing cached there, and the same greedy ids and log-probabilities up to the
// first step whose top two are within kGreedyMargin (a near-tie may flip on rounding).
void expect_reply_of_a_cold_engine(const Fixture& fx, const std::vector<int32_t>& prompt, const ServeResult& warm) {
  Backend cold_be = cpu_model_backend();
  auto cold_lm = model(cold_be, fx, 2);
  EngineOptions no_cache;
  no_cache.prefix_cache = false;
  Engine cold(*cold_lm, nullptr, no_cache);
  const ServeResult cold2 = cold.submit(greedy(prompt, 10, 2))->wait();
  ASSERT_EQ(cold2.finish_reason, "length") << cold2.error;
  EXPECT_EQ(cold2.cached_tokens, 0);
  ASSERT_EQ(warm.generated_ids.size(), cold2.generated_ids.size());
  for (size_t s = 0; s < cold2.generated_ids.size(); ++s) {
    const auto& top = cold2.top_logprobs[s];
    ASSERT_EQ(top.size(), 2u);
    if (top[0].logprob - top[1].logprob <= kGreedyMargin) break;
    EXPECT_EQ(warm.generated_ids[s], cold2.generated_ids[s]) << "step " << s;
    EXPECT_NEAR(warm.logprobs[s], cold2.logprobs[s], kLogprobTolerance) << "step " << s;
  }
}

} // namespace

TEST(SlotReuse, AttentionOnlyModelsReuseTheCommonPrefixAndKeepOneTokenToRead) {
  SlotReuse r(4, /*rewindable=*/true, /*enabled=*/true);
  r.ended(2, {5, 6, 7, 8, 9}, 5);
  r.ended(1, {5, 6, 1}, 3);
  const SlotReuse::Choice c = r.choose(std::vector<int32_t>{5, 6, 7, 3, 3}, kAll);
  EXPECT_EQ(c.slot, 2);
  EXPECT_EQ(c.reuse, 3);
  // A prompt the slot holds entirely still reads its last token.
  const SlotReuse::Choice whole = r.choose(std::vector<int32_t>{5, 6, 7, 8}, kAll);
  EXPECT_EQ(whole.slot, 2);
  EXPECT_EQ(whole.reuse, 3);
}

TEST(SlotReuse, RecurrentModelsReuseASlotOnlyWhenAllItsTokensBeginThePrompt) {
  SlotReuse r(4, /*rewindable=*/false, /*enabled=*/true);
  r.ended(2, {5, 6, 7, 8, 9}, 5);
  r.ended(3, {5, 6}, 2);
  const SlotReuse::Choice c = r.choose(std::vector<int32_t>{5, 6, 7, 3, 3}, kAll);
  EXPECT_EQ(c.slot, 3) << "slot 2 shares 3 tokens but its state covers 5";
  EXPECT_EQ(c.reuse, 2);
  EXPECT_EQ(r.choose(std::vector<int32_t>{5, 6, 7, 8, 9, 1}, kAll).reuse, 5);
  EXPECT_EQ(r.choose(std::vector<int32_t>{5, 6, 7, 8, 9}, kAll).slot, 3) << "slot 2 would leave no token to read";
}

TEST(SlotReuse, RecurrentModelsFallBackToTheSnapshotAtTheLastPromptsEnd) {
  SlotReuse r(2, /*rewindable=*/false, /*enabled=*/true);
  r.ended(0, {5, 6, 7, 8, 9}, 5, /*snapshot=*/3); // prompt 5 6 7, reply 8 9
  const SlotReuse::Choice c = r.choose(std::vector<int32_t>{5, 6, 7, 1, 2}, std::vector<int32_t>{0});
  EXPECT_EQ(c.reuse, 3);
  EXPECT_TRUE(c.restore);
  const SlotReuse::Choice whole = r.choose(std::vector<int32_t>{5, 6, 7, 8, 9, 1}, std::vector<int32_t>{0});
  EXPECT_EQ(whole.reuse, 5) << "all of the slot's tokens begin the prompt: no restore";
  EXPECT_FALSE(whole.restore);
  EXPECT_EQ(r.choose(std::vector<int32_t>{5, 6, 1}, std::vector<int32_t>{0}).reuse, 0) << "diverges inside the prompt";
  EXPECT_EQ(r.choose(std::vector<int32_t>{5, 6, 7}, std::vector<int32_t>{0}).reuse, 0) << "no token left to read";
  r.ended(1, {5, 6, 7, 8}, 9, 3); // fed tokens nobody read: the snapshot still holds
  EXPECT_TRUE(r.tokens(1).empty());
  EXPECT_TRUE(r.choose(std::vector<int32_t>{5, 6, 7, 1}, std::vector<int32_t>{1}).restore);
}

TEST(SlotReuse, WithoutReuseTheLeastRecentlyUsedSlotIsTaken) {
  SlotReuse r(3, true, true);
  r.ended(1, {1}, 1);
  r.ended(0, {2}, 1);
  r.ended(2, {3}, 1);
  EXPECT_EQ(r.choose(std::vector<int32_t>{9, 9}, std::vector<int32_t>{0, 1, 2}).slot, 1);
  EXPECT_EQ(r.choose(std::vector<int32_t>{9, 9}, std::vector<int32_t>{0, 2}).slot, 0);
  SlotReuse off(3, true, false);
  off.ended(1, {9}, 1);
  EXPECT_EQ(off.choose(std::vector<int32_t>{9, 9}, std::vector<int32_t>{1}).reuse, 0) << "disabled";
}

TEST(SlotReuse, FedTokensBeyondTheKnownOnesForgetTheSlot) {
  SlotReuse r(2, false, true);
  r.ended(0, {4, 5, 6}, 2);
  EXPECT_EQ(std::vector<int32_t>(r.tokens(0).begin(), r.tokens(0).end()), (std::vector<int32_t>{4, 5}));
  r.ended(0, {4, 5, 6}, 4); // a pick nobody read was fed
  EXPECT_TRUE(r.tokens(0).empty());
}

// Attention-only model: a request for a prefix of a fixture prompt leaves it in its slot; the
// whole prompt then reads only the rest, and its greedy ids are transformers'.
TEST(ServingEngine, PromptReadPartlyFromASlotGivesTransformersGreedyIds) {
  const Fixture fx = Fixture::load("tiny-qwen3");
  Backend be = cpu_model_backend();
  auto lm = model(be, fx, 2);
  Engine engine(*lm, nullptr, {8});
  const FixtureCase& c = fx.cases.back(); // the longest prompt
  const size_t k = c.prompt.size() / 2;
  ASSERT_GT(k, 1u);
  const ServeResult first =
      engine.submit(greedy(std::vector<int32_t>(c.prompt.begin(), c.prompt.begin() + static_cast<ptrdiff_t>(k)), 3))->wait();
  ASSERT_EQ(first.finish_reason, "length") << first.error;
  EXPECT_EQ(first.cached_tokens, 0);
  const ServeResult second = engine.submit(greedy(c.prompt, 12))->wait();
  ASSERT_EQ(second.finish_reason, "length") << second.error;
  EXPECT_GE(second.cached_tokens, static_cast<int64_t>(k));
  EXPECT_LT(second.cached_tokens, static_cast<int64_t>(c.prompt.size()));
  EXPECT_EQ(second.prompt_tokens, static_cast<int64_t>(c.prompt.size()));
  size_t trusted = 0;
  while (trusted < c.greedy.size() && c.margin[trusted] > kGreedyMargin) ++trusted;
  ASSERT_GT(trusted, 0u);
  for (size_t s = 0; s < std::min<size_t>(trusted, 12); ++s) EXPECT_EQ(second.generated_ids[s], c.greedy[s]) << "step " << s;
}

// Hybrid model, a chat's next turn: the prompt is the first turn's prompt, its reply and stop
// token, then more tokens. Read from the slot it generates what a server without reuse does.
TEST(ServingEngine, NextTurnReadFromTheSlotMatchesTheWholePromptOnAHybridModel) {
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  const FixtureCase& c = fx.cases.back(); // the longest prompt
  const int32_t stop = c.greedy.at(3); // ends the first turn a few tokens in, as a chat's end token does
  Backend be = cpu_model_backend();
  auto lm = model(be, fx, 2);
  Engine warm(*lm, nullptr, {8});
  GenerationRequest turn1 = greedy(c.prompt, 16);
  turn1.stop.token_ids = {stop};
  const ServeResult r1 = warm.submit(turn1)->wait();
  ASSERT_TRUE(r1.finish_reason == "stop" || r1.finish_reason == "length") << r1.finish_reason << " " << r1.error;
  const bool stopped = r1.finish_reason == "stop";
  std::vector<int32_t> next = concat(c.prompt, r1.generated_ids);
  if (stopped) next.push_back(stop);
  next = concat(next, std::vector<int32_t>(c.prompt.begin(), c.prompt.begin() + 5));
  const ServeResult warm2 = warm.submit(greedy(next, 10, 2))->wait();
  ASSERT_EQ(warm2.finish_reason, "length") << warm2.error;
  // Every generated id was fed by the step after it (the last one too when a stop token ended
  // the turn: that step fed it and read the stop).
  const size_t fed_at_least = c.prompt.size() + r1.generated_ids.size() - (stopped ? 0 : 1);
  EXPECT_GE(warm2.cached_tokens, static_cast<int64_t>(fed_at_least));
  EXPECT_LT(warm2.cached_tokens, static_cast<int64_t>(next.size()));

  expect_reply_of_a_cold_engine(fx, next, warm2);
}

// A next turn whose reply differs from the one generated (a template that re-renders or drops
// it) resumes a hybrid model from the snapshot at the first prompt's end, and generates what a
// server without reuse does.
TEST(ServingEngine, HybridModelResumesFromTheSnapshotWhenTheReplyDiffers) {
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  const FixtureCase& c = fx.cases.back();
  ModelOptions o;
  o.max_context = 256;
  o.max_sequences = 2;
  o.prefill_chunk = 7;
  o.state_snapshots = true;
  Backend be = cpu_model_backend();
  auto lm = CausalLM::load(fx.checkpoint, be, o);
  Engine warm(*lm, nullptr, {8});
  const ServeResult r1 = warm.submit(greedy(c.prompt, 6))->wait();
  ASSERT_EQ(r1.finish_reason, "length") << r1.error;
  std::vector<int32_t> next = c.prompt;
  for (int32_t id : r1.generated_ids) next.push_back((id + 1) % static_cast<int32_t>(lm->vocab_size()));
  next = concat(next, {11, 12, 13});
  const ServeResult warm2 = warm.submit(greedy(next, 10, 2))->wait();
  ASSERT_EQ(warm2.finish_reason, "length") << warm2.error;
  EXPECT_EQ(warm2.cached_tokens, static_cast<int64_t>(c.prompt.size()));

  expect_reply_of_a_cold_engine(fx, next, warm2);
}

// Without snapshots, a prompt that diverges from the slot inside the hybrid model's earlier
// turn cannot use it: read whole, with nothing cached.
TEST(ServingEngine, HybridModelReadsADivergingPromptWhole) {
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  const FixtureCase& c = fx.cases.back(); // the longest prompt
  Backend be = cpu_model_backend();
  auto lm = model(be, fx, 1);
  Engine engine(*lm, nullptr, {8});
  ASSERT_EQ(engine.submit(greedy(c.prompt, 4))->wait().finish_reason, "length");
  std::vector<int32_t> other = c.prompt;
  other[other.size() / 2] = (other[other.size() / 2] + 1) % static_cast<int32_t>(lm->vocab_size());
  const ServeResult r = engine.submit(greedy(other, 4))->wait();
  ASSERT_EQ(r.finish_reason, "length") << r.error;
  EXPECT_EQ(r.cached_tokens, 0);
}
