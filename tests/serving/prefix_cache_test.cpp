// The prefix cache across slots (ninfer/serving/prefix_cache.hpp) on the CPU plugin: blocks found
// by their token chain (never by a hash alone), a prefix one request computed read by another
// in another slot, and eviction under a small pool; every reply against the same request on an
// engine without the cache, which computes every prompt whole.
#include <gtest/gtest.h>

#include "prefix_cache_env.hpp"

using namespace ninfer;
using namespace ninfer::serving;
using namespace ninfer::test;

// With every chain hash equal, the cache still finds a block only after the same blocks and
// with the same tokens: the hash only narrows the search.
TEST(PrefixCache, CollidingHashesNeverShareAnotherChainsBlocks) {
  const Fixture fx = Fixture::load("tiny-qwen3");
  auto rng = fresh_rng("prefix cache collisions");
  Backend be = cpu_model_backend();
  auto lm = model(be, fx, 3);
  PrefixCache cache(*lm, [](uint64_t, std::span<const int32_t>) { return uint64_t{7}; });
  const std::vector<int32_t> x = random_ids(fx, kBlock, rng), y = random_ids(fx, kBlock, rng);
  const std::vector<int32_t> xy = concat(x, y), yy = concat(y, y);
  compute_and_offer(*lm, cache, 0, xy);
  compute_and_offer(*lm, cache, 1, yy);
  EXPECT_EQ(cache.blocks(), 4);
  const std::span<const int32_t> row0 = lm->kv_block_row(0), row1 = lm->kv_block_row(1);
  EXPECT_EQ(cache.match(xy, 2 * kBlock).blocks, std::vector<int32_t>(row0.begin(), row0.end()));
  EXPECT_EQ(cache.match(yy, 2 * kBlock).blocks, std::vector<int32_t>(row1.begin(), row1.end()));
  // y after y is cached, y after x too, but x after y is not: only y's first block matches.
  EXPECT_EQ(cache.match(concat(y, x), 2 * kBlock).blocks, std::vector<int32_t>{row1[0]});
  // Neither chain begins with y's first half twice.
  std::vector<int32_t> other = x;
  other[kBlock - 1] = (other[kBlock - 1] + 1) % static_cast<int32_t>(fx.vocab);
  EXPECT_TRUE(cache.match(concat(other, y), 2 * kBlock).blocks.empty());
  // At most `most_tokens`, in whole blocks.
  EXPECT_EQ(cache.match(xy, 2 * kBlock - 1).blocks.size(), 1u);
  // The cache's hold keeps the rows after the slot lets go, and only then are they evictable.
  EXPECT_EQ(lm->kv_blocks_evictable(), 0);
  lm->release_kv(0);
  EXPECT_EQ(lm->kv_blocks_evictable(), 2);
  EXPECT_EQ(lm->kv_block_holders(row1[0]), 2);
  EXPECT_TRUE(cache.evict_one());
  EXPECT_TRUE(cache.evict_one());
  EXPECT_FALSE(cache.evict_one()) << "slot 1 still holds the other two";
  EXPECT_TRUE(cache.match(xy, 2 * kBlock).blocks.empty());
}

// A block adopted from the cache gives the slot the rows of the prefix: what it decodes after the
// rest of the prompt equals the whole prompt read in a fresh slot, and the cached block is never
// written (a slot writing into it copies it first).
TEST(PrefixCache, AdoptedBlocksContinueAsTheWholePromptWould) {
  const Fixture fx = Fixture::load("tiny-qwen3");
  auto rng = fresh_rng("prefix cache adopt");
  Backend be = cpu_model_backend();
  auto lm = model(be, fx, 3);
  PrefixCache cache(*lm);
  const std::vector<int32_t> prefix = random_ids(fx, 2 * kBlock, rng), rest = random_ids(fx, 9, rng);
  compute_and_offer(*lm, cache, 0, concat(prefix, random_ids(fx, 5, rng)));
  const std::vector<int32_t> prompt = concat(prefix, rest);
  const std::vector<int32_t> blocks = cache.match(prompt, static_cast<int64_t>(prompt.size()) - 1).blocks;
  ASSERT_EQ(blocks.size(), 2u);
  lm->adopt_prefix(1, blocks);
  EXPECT_EQ(lm->position(1), 2 * kBlock);
  EXPECT_EQ(lm->kv_blocks_shared(1), 2);
  const std::vector<float> got = lm->prefill(1, rest);
  lm->release_kv(2);
  const std::vector<float> want = lm->prefill(2, prompt);
  EXPECT_LE(max_abs_diff(got, want), 1e-4);
  // Rolled back into a shared block, the slot copies it before writing: slot 0's prefix stays.
  lm->truncate(1, kBlock + 3);
  lm->prefill(1, random_ids(fx, 12, rng));
  EXPECT_NE(lm->kv_block_row(1)[1], blocks[1]);
  lm->adopt_prefix(2, cache.match(prompt, static_cast<int64_t>(prompt.size()) - 1).blocks);
  EXPECT_LE(max_abs_diff(lm->prefill(2, rest), want), 1e-4);
  EXPECT_THROW(lm->adopt_prefix(1, std::vector<int32_t>{static_cast<int32_t>(lm->kv_blocks_total())}), Error);
}

// Two requests that share a system prompt in different slots (the first one's slot is busy with
// another request when the second comes): the second reads the shared full blocks and computes
// only the rest, and both reply as without the cache.
TEST(ServingPrefixCache, ASharedSystemPromptIsComputedOnce) {
  const Fixture fx = Fixture::load("tiny-qwen3");
  auto rng = fresh_rng("prefix cache system prompt");
  const std::vector<int32_t> system = random_ids(fx, 2 * kBlock + 5, rng);
  const GenerationRequest a = greedy(concat(system, random_ids(fx, 6, rng)), 8);
  // Shares the first three tokens with a's slot only: it takes that slot, so b gets the other.
  GenerationRequest busy = greedy(concat(std::vector<int32_t>(system.begin(), system.begin() + 3),
                                         random_ids(fx, 4, rng)),
                                  60);
  const GenerationRequest b = greedy(concat(system, random_ids(fx, 9, rng)), 8);
  const std::vector<ServeResult> want = cold_replies(fx, {a, busy, b});

  Backend be = cpu_model_backend();
  auto lm = model(be, fx, 2);
  Engine engine(*lm, nullptr, {16});
  const ServeResult ra = engine.submit(a)->wait();
  EXPECT_EQ(engine.load().prefix_cache_blocks, 2);
  const int64_t computed_before = engine.stats().prompt_tokens;
  auto hb = engine.submit(busy);
  const ServeResult rb = engine.submit(b)->wait();
  const int64_t computed = engine.stats().prompt_tokens - computed_before;
  const ServeResult rbusy = hb->wait();
  expect_same_reply(ra, want[0], "a");
  expect_same_reply(rbusy, want[1], "busy");
  expect_same_reply(rb, want[2], "b");
  EXPECT_EQ(rbusy.cached_tokens, 3);
  EXPECT_EQ(rb.cached_tokens, 2 * kBlock);
  EXPECT_EQ(computed, (static_cast<int64_t>(busy.prompt_ids.size()) - 3) +
                          (static_cast<int64_t>(b.prompt_ids.size()) - 2 * kBlock));
}

// A pool of 10 blocks for 3 slots of 256 positions: many requests sharing a few prefixes, run
// concurrently, make the cache give blocks back for admissions while others decode. Every reply
// equals its request's without the cache, also with every chain hash colliding.
TEST(ServingPrefixCache, EvictionUnderASmallPoolNeverChangesAReply) {
  const Fixture fx = Fixture::load("tiny-qwen3");
  auto rng = fresh_rng("prefix cache eviction");
  std::vector<std::vector<int32_t>> prefixes;
  for (int i = 0; i < 3; ++i) prefixes.push_back(random_ids(fx, kBlock + 20 + 10 * i, rng));
  std::vector<GenerationRequest> reqs;
  std::uniform_int_distribution<size_t> pick(0, prefixes.size() - 1);
  std::uniform_int_distribution<int64_t> tail(1, 12), new_tokens(10, 60);
  for (int i = 0; i < 12; ++i)
    reqs.push_back(greedy(concat(prefixes[pick(rng)], random_ids(fx, static_cast<size_t>(tail(rng)), rng)),
                          new_tokens(rng)));
  const std::vector<ServeResult> want = cold_replies(fx, reqs);
  for (const bool collide : {false, true}) {
    Backend be = cpu_model_backend();
    auto lm = model(be, fx, 3, 10 * kBlock);
    EngineOptions o;
    if (collide) o.prefix_hash = [](uint64_t, std::span<const int32_t>) { return uint64_t{1}; };
    Engine engine(*lm, nullptr, o);
    // In waves of three, so later waves find what earlier ones left.
    const int64_t cached = run_waves(engine, reqs, want, collide ? "colliding hashes" : "real hashes");
    EXPECT_GT(cached, 0);
    EXPECT_GT(engine.load().prefix_cache_evictions, 0) << "the pool was never short";
    EXPECT_LE(engine.load().prefix_cache_blocks, 10);
  }
}

// --no-prefix-cache: nothing is cached and every prompt is computed whole.
TEST(ServingPrefixCache, OffCachesNothing) {
  const Fixture fx = Fixture::load("tiny-qwen3");
  auto rng = fresh_rng("prefix cache off");
  const std::vector<int32_t> system = random_ids(fx, 2 * kBlock + 1, rng);
  Backend be = cpu_model_backend();
  auto lm = model(be, fx, 2);
  EngineOptions off;
  off.prefix_cache = false;
  Engine engine(*lm, nullptr, off);
  for (int i = 0; i < 2; ++i) {
    const ServeResult r = engine.submit(greedy(concat(system, random_ids(fx, 3, rng)), 4))->wait();
    EXPECT_EQ(r.cached_tokens, 0);
  }
  EXPECT_EQ(engine.load().prefix_cache_blocks, 0);
  EXPECT_EQ(engine.stats().prompt_tokens, 2 * (2 * kBlock + 4));
}
