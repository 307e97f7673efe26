// The prefix cache's host tier (PrefixCache::enable_host, ninfer-serve --host-cache-gib) on the CPU
// plugin: an evicted block, or a state copy given up, goes to host memory and comes back on a
// match with its rows, whatever the device block it left has held since; a full host tier drops
// its oldest; engines with a host tier under a small KV pool reply as engines without the cache.
#include <gtest/gtest.h>

#include "prefix_cache_env.hpp"

using namespace ninfer;
using namespace ninfer::serving;
using namespace ninfer::test;

namespace {

// The cache's last row of logits for `prompt` read partly from its blocks in `slot`, against the
// whole prompt read afresh in `fresh`.
double adopted_vs_whole(CausalLM& lm, PrefixCache& cache, int32_t slot, int32_t fresh,
                        const std::vector<int32_t>& prompt, size_t want_blocks) {
  const PrefixCache::Match hit = cache.match(prompt, static_cast<int64_t>(prompt.size()) - 1);
  EXPECT_EQ(hit.blocks.size(), want_blocks);
  if (hit.blocks.size() != want_blocks) return 1e9;
  lm.adopt_prefix(slot, hit.blocks, hit.state);
  const std::vector<float> got =
      lm.prefill(slot, std::span(prompt).subspan(hit.blocks.size() * static_cast<size_t>(kBlock)));
  lm.release_kv(fresh);
  return max_abs_diff(got, lm.prefill(fresh, prompt));
}

} // namespace

// Two blocks evicted to the host, their device blocks rewritten by another sequence, come back
// for a match with the rows they had; a third block spilled into a host tier of two drops the
// oldest, whose chain then matches no further than before it.
TEST(PrefixCache, EvictedBlocksComeBackFromTheHost) {
  const Fixture fx = Fixture::load("tiny-qwen3");
  auto rng = fresh_rng("host tier blocks");
  Backend be = cpu_model_backend();
  auto lm = model(be, fx, 3, 8 * kBlock);
  PrefixCache cache(*lm);
  cache.enable_host(2 * lm->kv_block_bytes());
  EXPECT_EQ(cache.host_counts().block_room, 2);
  const std::vector<int32_t> prefix = random_ids(fx, 2 * kBlock, rng), rest = random_ids(fx, 7, rng);
  compute_and_offer(*lm, cache, 0, prefix);
  lm->release_kv(0);
  ASSERT_TRUE(cache.evict_one());
  ASSERT_TRUE(cache.evict_one());
  EXPECT_EQ(cache.blocks(), 0);
  EXPECT_EQ(cache.host_counts().blocks, 2);
  lm->prefill(1, random_ids(fx, 8 * kBlock - 1, rng)); // every block of the pool rewritten
  lm->release_kv(1);
  EXPECT_LE(adopted_vs_whole(*lm, cache, 1, 2, concat(prefix, rest), 2), 1e-4);
  EXPECT_EQ(cache.host_counts().restored_blocks, 2);
  EXPECT_EQ(cache.host_counts().blocks, 0);

  // Three blocks to a host tier of two: the first spilled (the prefix's second block, the LRU
  // end of its chain) is dropped; the first block still matches.
  lm->release_kv(1);
  lm->release_kv(2);
  const std::vector<int32_t> other = random_ids(fx, kBlock, rng);
  compute_and_offer(*lm, cache, 0, other);
  lm->release_kv(0);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cache.evict_one());
  EXPECT_EQ(cache.host_counts().blocks, 2);
  EXPECT_EQ(cache.match(concat(prefix, rest), 100).blocks.size(), 1u);
}

// A recurrent model's state copy given up for a newer one goes to the host and comes back for a
// match: the adopting slot continues as the whole prompt read afresh would.
TEST(PrefixCache, StateCopiesGivenUpComeBackFromTheHost) {
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  auto rng = fresh_rng("host tier states");
  Backend be = cpu_model_backend();
  auto lm = model(be, fx, 3, 0, 1);
  PrefixCache cache(*lm);
  cache.enable_host(8 * (lm->kv_block_bytes() + lm->prefix_state_bytes()));
  EXPECT_GE(cache.host_counts().state_room, 1);
  const std::vector<int32_t> a = random_ids(fx, 2 * kBlock, rng), b = random_ids(fx, kBlock, rng);
  compute_and_offer(*lm, cache, 0, a);
  compute_and_offer(*lm, cache, 1, b); // takes the only copy: a's goes to the host
  EXPECT_EQ(cache.state_evictions(), 1);
  EXPECT_EQ(cache.host_counts().states, 1);
  lm->prefill(1, random_ids(fx, 5, rng)); // slot 1 goes on; the copy is b's
  EXPECT_LE(adopted_vs_whole(*lm, cache, 2, 0, concat(a, random_ids(fx, 9, rng)), 2), 1e-4);
  EXPECT_EQ(cache.host_counts().restored_states, 1);
  EXPECT_EQ(cache.host_counts().states, 1) << "b's copy went to the host to make room";
}

// Engines whose KV pool is too small to keep what earlier requests left, with a host tier: waves
// of three requests over six prefixes (A B C, D E F, A B C, D E F) find the prefixes of two waves
// before on the host, and every reply equals its request's on an engine without the cache.
TEST(ServingPrefixCache, HostTierNeverChangesAReply) {
  for (const char* name : {"tiny-qwen3", "tiny-qwen3_5"}) {
    SCOPED_TRACE(name);
    const Fixture fx = Fixture::load(name);
    auto rng = fresh_rng((std::string("host tier engine ") + name).c_str());
    std::vector<std::vector<int32_t>> prefixes;
    for (int i = 0; i < 6; ++i) prefixes.push_back(random_ids(fx, 2 * kBlock + 20 + 7 * i, rng));
    const std::vector<GenerationRequest> reqs = requests_over(fx, prefixes, rng);
    const std::vector<ServeResult> want = cold_replies(fx, reqs);
    Backend be = cpu_model_backend();
    auto lm = model(be, fx, 3, 15 * kBlock, 1);
    EngineOptions o;
    o.prefix_state_interval = 2 * kBlock;
    o.host_cache_bytes = 64 * (lm->kv_block_bytes() + lm->prefix_state_bytes());
    Engine engine(*lm, nullptr, o);
    EXPECT_GT(engine.load().host_restore_bytes_per_s, 0);
    EXPECT_GT(run_waves(engine, reqs, want, name), 0);
    EXPECT_GT(engine.load().host.restored_blocks, 0) << "no block came back from the host";
  }
}

// A conversation's next turn after unrelated requests took both slots and the device's blocks
// (serve-turns' order, scaled to 32-token blocks: a warm-up, the first turn, two other prompts of
// the same length, then the second turn, on two slots whose KV pool holds two contexts, with
// four state copies and a host tier). The other requests evicted the first turn's deeper blocks
// to the host, and the pool has no free block left when the second turn arrives, so its match
// restores them only after the engine makes room: that room must come from other chains, not
// from the device blocks of the chain being matched (which left the turn at an interval copy, or
// with nothing when the prompt's end was its only copy). The second turn resumes at its previous
// prompt's last block boundary, and every reply equals the one an engine without the cache gives.
TEST(ServingPrefixCache, ANextTurnAfterOtherRequestsResumesAtItsPromptsEnd) {
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  auto rng = fresh_rng("host tier next turn");
  // (interval, prompt): the end's copy alone (at 192, at 160); interval copies at 64 and 128
  // before the end's at 192; at 32, 64 and 96 before 128; a prompt ending on a block boundary.
  const std::vector<std::pair<int64_t, size_t>> cases{
      {0, 6 * kBlock + 30}, {0, 5 * kBlock + 30}, {2 * kBlock, 6 * kBlock + 30}, {kBlock, 4 * kBlock + 20}, {2 * kBlock, 5 * kBlock}};
  for (const auto& [interval, prompt] : cases) {
    SCOPED_TRACE(testing::Message() << "interval " << interval << ", prompts of " << prompt);
    const GenerationRequest warm = greedy(random_ids(fx, prompt, rng), 6);
    const GenerationRequest turn1 = greedy(random_ids(fx, prompt, rng), 6);
    const GenerationRequest other1 = greedy(random_ids(fx, prompt, rng), 6);
    const GenerationRequest other2 = greedy(random_ids(fx, prompt, rng), 6);
    Backend be = cpu_model_backend();
    auto lm = model(be, fx, 2, 0, 4);
    EngineOptions o;
    o.prefix_state_interval = interval;
    o.host_cache_bytes = 64 * (lm->kv_block_bytes() + lm->prefix_state_bytes());
    Engine engine(*lm, nullptr, o);
    std::vector<ServeResult> got;
    for (const GenerationRequest* r : {&warm, &turn1, &other1, &other2}) got.push_back(engine.submit(*r)->wait());
    const GenerationRequest turn2 =
        greedy(concat(concat(turn1.prompt_ids, got[1].generated_ids), random_ids(fx, 5, rng)), 6);
    got.push_back(engine.submit(turn2)->wait());
    const std::vector<ServeResult> want = cold_replies(fx, {warm, turn1, other1, other2, turn2});
    for (size_t i = 0; i < want.size(); ++i) expect_same_reply(got[i], want[i], "request " + std::to_string(i));
    EXPECT_EQ(got[4].cached_tokens, static_cast<int64_t>(prompt / kBlock * kBlock))
        << "the first turn's prompt-end copy or blocks were lost";
  }
}
