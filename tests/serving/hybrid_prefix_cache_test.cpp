// The prefix cache on models with Gated DeltaNet layers (ninfer/serving/prefix_cache.hpp): blocks
// are resumable only where the cache holds a copy of the recurrent state after them. A slot that
// adopts cached blocks and a state copy continues exactly as the whole prompt read in a fresh slot
// would; the engine takes copies at prompt positions every interval and at each prompt's last
// block boundary, so a shared system prompt or an earlier turn of a conversation is computed once
// even when the next request runs in another slot; copies given up under a small pool never
// change a reply. Replies are compared with the same requests on an engine without the cache.
#include <gtest/gtest.h>

#include "prefix_cache_env.hpp"

using namespace ninfer;
using namespace ninfer::serving;
using namespace ninfer::test;

namespace {

// The cache's state copies every this many prompt positions in the engine tests (two blocks).
constexpr int64_t kInterval = 2 * kBlock;

EngineOptions with_interval(int64_t interval = kInterval) {
  EngineOptions o;
  o.prefix_state_interval = interval;
  return o;
}

} // namespace

// The cache's contract on a hybrid model, driven by hand: a chain resumes only at an entry with a
// state copy; the copy taken after the prompt's first two blocks, adopted with them by another
// slot, gives what the whole prompt read afresh gives; a third copy in a pool of two takes the
// least recently used one's, whose chain then matches no longer.
TEST(PrefixCache, ARecurrentModelResumesWhereAStateCopyWasTaken) {
  for (const char* name : {"tiny-qwen3_5", "models/qwen3_5-demo"}) {
    SCOPED_TRACE(name);
    const Fixture fx = Fixture::load(name);
    auto rng = fresh_rng((std::string("hybrid prefix cache ") + name).c_str());
    Backend be = cpu_model_backend();
    auto lm = model(be, fx, 3, 0, 2);
    ASSERT_FALSE(lm->can_truncate());
    ASSERT_EQ(lm->prefix_states(), 2);
    PrefixCache cache(*lm);
    const std::vector<int32_t> prefix = random_ids(fx, 2 * kBlock, rng), rest = random_ids(fx, 11, rng);
    const std::vector<int32_t> prompt = concat(prefix, rest);

    lm->prefill(0, std::span(prefix).first(kBlock));
    cache.offer(0, std::span(prefix).first(kBlock)); // blocks, no state: not resumable
    EXPECT_TRUE(cache.match(prompt, static_cast<int64_t>(prompt.size()) - 1).blocks.empty());
    lm->prefill(0, std::span(prefix).subspan(kBlock));
    const int32_t copy = cache.offer_state(0, prefix);
    ASSERT_GE(copy, 0);
    lm->save_prefix_state(0, copy);
    EXPECT_EQ(cache.offer_state(0, prefix), -1) << "the entry holds a copy already";
    lm->prefill(0, random_ids(fx, 9, rng)); // slot 0 goes on: the copy is the state where it was taken

    const PrefixCache::Match hit = cache.match(prompt, static_cast<int64_t>(prompt.size()) - 1);
    ASSERT_EQ(hit.blocks.size(), 2u);
    EXPECT_EQ(hit.state, copy);
    EXPECT_THROW(lm->adopt_prefix(1, hit.blocks), Error) << "blocks without their state";
    lm->adopt_prefix(1, hit.blocks, hit.state);
    EXPECT_EQ(lm->position(1), 2 * kBlock);
    const std::vector<float> got = lm->prefill(1, rest);
    lm->release_kv(2);
    const std::vector<float> want = lm->prefill(2, prompt);
    EXPECT_LE(max_abs_diff(got, want), 1e-4);

    // Two more copies in a pool of two: the first (least recently used) is given up.
    for (int i = 0; i < 2; ++i) {
      const std::vector<int32_t> other = random_ids(fx, kBlock, rng);
      lm->release_kv(2);
      lm->prefill(2, other);
      const int32_t c = cache.offer_state(2, other);
      ASSERT_GE(c, 0);
      lm->save_prefix_state(2, c);
    }
    EXPECT_EQ(cache.states(), 2);
    EXPECT_EQ(cache.state_evictions(), 1);
    EXPECT_TRUE(cache.match(prompt, static_cast<int64_t>(prompt.size()) - 1).blocks.empty());
  }
}

// A shared system prompt and a conversation's next turn on the engine, each next request in
// another slot than the one that computed its prefix (that slot is busy): the next request reads
// the cached blocks up to the deepest state copy (the system prompt's copy every kInterval, the
// first turn's copy at its prompt's last block boundary) and computes only the rest; every
// reply equals the request's on an engine without the cache.
TEST(ServingPrefixCache, HybridPrefixesAreComputedOnceAcrossSlots) {
  for (const char* name : {"tiny-qwen3_5", "models/qwen3_5-demo"}) {
    SCOPED_TRACE(name);
    const Fixture fx = Fixture::load(name);
    auto rng = fresh_rng((std::string("hybrid prefix cache engine ") + name).c_str());
    const std::vector<int32_t> system = random_ids(fx, 2 * kInterval + 9, rng);
    // a's prompt ends 40 tokens past the system prompt: its last block boundary (160) is past the
    // system prompt's deepest interval point (128).
    const GenerationRequest a = greedy(concat(system, random_ids(fx, 40, rng)), 8);
    // No slot's tokens begin it: it takes the least recently used slot, the one a did not run in.
    const GenerationRequest busy =
        greedy(concat(std::vector<int32_t>(system.begin(), system.begin() + 3), random_ids(fx, 4, rng)), 40);
    const GenerationRequest b = greedy(concat(system, random_ids(fx, 9, rng)), 8);
    const std::vector<ServeResult> want = cold_replies(fx, {a, busy, b});

    Backend be = cpu_model_backend();
    auto lm = model(be, fx, 2, 0, 4);
    Engine engine(*lm, nullptr, with_interval());
    const ServeResult ra = engine.submit(a)->wait();
    // a's prompt (2 * kInterval + 49 tokens): copies at kInterval, 2 * kInterval and its last block
    // boundary, 5 * kBlock.
    EXPECT_EQ(engine.load().prefix_cache_states, 3);
    auto hb = engine.submit(busy);
    const int64_t computed_before = engine.stats().prompt_tokens;
    const ServeResult rb = engine.submit(b)->wait();
    const ServeResult rbusy = hb->wait();
    expect_same_reply(ra, want[0], "a");
    expect_same_reply(rbusy, want[1], "busy");
    expect_same_reply(rb, want[2], "b");
    EXPECT_EQ(rb.cached_tokens, 2 * kInterval) << "the system prompt's deepest copy";
    EXPECT_GE(engine.stats().prompt_tokens - computed_before,
              static_cast<int64_t>(b.prompt_ids.size()) - 2 * kInterval);

    // The next turn of a's conversation (its prompt, reply and a new message), beside busy again:
    // no slot holds a's tokens any more (b and busy ran since), so it resumes from the cache at
    // a's prompt's last block boundary.
    std::vector<int32_t> turn2 = concat(concat(a.prompt_ids, ra.generated_ids), random_ids(fx, 7, rng));
    const GenerationRequest next = greedy(turn2, 6);
    const ServeResult want_next = cold_replies(fx, {next}).front();
    auto hbusy = engine.submit(busy);
    const ServeResult rnext = engine.submit(next)->wait();
    hbusy->wait();
    expect_same_reply(rnext, want_next, "next turn");
    EXPECT_EQ(rnext.cached_tokens, static_cast<int64_t>(a.prompt_ids.size()) / kBlock * kBlock);
  }
}

// A system prompt shorter than the interval, shared by two conversations whose prompts end past
// it: the state copies at each prompt's last block boundary lie past the shared tokens, so only
// a state point at the end of the system prompt (GenerationRequest::state_points, which
// ninfer-serve sets at a chat's first message) lets the second conversation resume from it, at
// the system prompt's last block boundary. Replies equal those of an engine without the cache.
TEST(ServingPrefixCache, AStatePointSharesASystemPromptShorterThanTheInterval) {
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  auto rng = fresh_rng("hybrid prefix cache state points");
  const std::vector<int32_t> system = random_ids(fx, 2 * kBlock + 11, rng);
  GenerationRequest a = greedy(concat(system, random_ids(fx, 40, rng)), 6);
  GenerationRequest b = greedy(concat(system, random_ids(fx, 23, rng)), 6);
  const std::vector<ServeResult> want = cold_replies(fx, {a, b});
  for (const bool points : {false, true}) {
    SCOPED_TRACE(points ? "with the state point" : "without");
    a.state_points = b.state_points = points ? std::vector<int64_t>{static_cast<int64_t>(system.size())}
                                             : std::vector<int64_t>{};
    Backend be = cpu_model_backend();
    auto lm = model(be, fx, 2, 0, 4);
    Engine engine(*lm, nullptr, with_interval(8 * kInterval)); // past every prompt here
    const ServeResult ra = engine.submit(a)->wait();
    const ServeResult rb = engine.submit(b)->wait();
    expect_same_reply(ra, want[0], "a");
    expect_same_reply(rb, want[1], "b");
    EXPECT_EQ(ra.cached_tokens, 0);
    EXPECT_EQ(rb.cached_tokens, points ? 2 * kBlock : 0);
    // a's copies: its prompt's last block boundary (3 blocks), and the state point's (2 blocks).
    EXPECT_EQ(engine.load().prefix_cache_states, points ? 3 : 2);
  }
}

// Interval copies never take a conversation's: with two state copies, a conversation's prompt-end
// copy, then a long prompt whose interval points (every block) would each give up the least
// recently used copy. The long prompt's interval copies give each other up and its own end takes
// the last one, so the conversation's next turn (in another slot: a short request without copies
// ran in its slot meanwhile) still resumes at its prompt's last block boundary. Replies equal
// those of an engine without the cache.
TEST(ServingPrefixCache, IntervalCopiesNeverTakeAConversationsCopy) {
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  auto rng = fresh_rng("hybrid prefix cache anchors");
  const GenerationRequest a = greedy(random_ids(fx, 2 * kBlock + 10, rng), 6);
  const GenerationRequest longer = greedy(random_ids(fx, 7 * kBlock, rng), 4);
  const GenerationRequest other = greedy(random_ids(fx, kBlock - 12, rng), 4); // no block: no copy
  Backend be = cpu_model_backend();
  auto lm = model(be, fx, 2, 0, 2);
  Engine engine(*lm, nullptr, with_interval(kBlock));
  const ServeResult ra = engine.submit(a)->wait();
  const ServeResult rl = engine.submit(longer)->wait();
  const ServeResult ro = engine.submit(other)->wait();
  EXPECT_EQ(engine.load().prefix_cache_states, 2);
  const GenerationRequest next = greedy(concat(concat(a.prompt_ids, ra.generated_ids), random_ids(fx, 5, rng)), 6);
  const ServeResult rnext = engine.submit(next)->wait();
  const std::vector<ServeResult> want = cold_replies(fx, {a, longer, other, next});
  expect_same_reply(ra, want[0], "a");
  expect_same_reply(rl, want[1], "longer");
  expect_same_reply(ro, want[2], "other");
  expect_same_reply(rnext, want[3], "next turn");
  EXPECT_EQ(rnext.cached_tokens, 2 * kBlock) << "a's prompt-end copy was given up";
}

// Many requests over three shared prefixes (84, 101 and 118 tokens, each wave of three taking
// each once) on three slots with only two state copies and a 14-block KV pool: copies and blocks
// are given up all the time, hits resume from whatever is left, and every reply equals its
// request's without the cache. Tails of at most 8 tokens keep each prompt's last block boundary
// inside its prefix, so copies taken at prompts' ends are shared too (an interval of 0 takes
// only those).
TEST(ServingPrefixCache, HybridCopiesGivenUpNeverChangeAReply) {
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  auto rng = fresh_rng("hybrid prefix cache eviction");
  std::vector<std::vector<int32_t>> prefixes;
  for (int i = 0; i < 3; ++i) prefixes.push_back(random_ids(fx, kInterval + 20 + 17 * i, rng));
  const std::vector<GenerationRequest> reqs = requests_over(fx, prefixes, rng);
  const std::vector<ServeResult> want = cold_replies(fx, reqs);
  for (const int64_t interval : {kInterval, int64_t{0}}) {
    Backend be = cpu_model_backend();
    auto lm = model(be, fx, 3, 14 * kBlock, 2);
    Engine engine(*lm, nullptr, with_interval(interval));
    EXPECT_GT(run_waves(engine, reqs, want, "interval " + std::to_string(interval)), 0) << "interval " << interval;
    EXPECT_GT(engine.load().prefix_cache_state_evictions, 0) << "interval " << interval << ": two copies sufficed";
    EXPECT_LE(engine.load().prefix_cache_states, 2);
  }
}

// The options' refusals: an interval that is not a multiple of the KV block; state copies with
// speculation.
TEST(ServingPrefixCache, HybridOptionsAreChecked) {
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  Backend be = cpu_model_backend();
  auto lm = model(be, fx, 1, 0, 2);
  EXPECT_THROW(Engine(*lm, nullptr, with_interval(kBlock + 1)), Error);
  EXPECT_THROW(Engine(*lm, nullptr, with_interval(-kBlock)), Error);
  const Fixture demo = Fixture::load("models/qwen3_5-demo");
  ModelOptions o;
  o.max_context = 128;
  o.prefix_states = 2;
  o.speculation = {SpecMethod::Mtp, 2};
  Backend be2 = cpu_model_backend();
  EXPECT_THROW(CausalLM::load(demo.checkpoint, be2, o), Error);
}
