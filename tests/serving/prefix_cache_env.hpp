// What the prefix cache's tests share (prefix_cache_test.cpp, hybrid_prefix_cache_test.cpp): a small
// CPU model with 32-token KV blocks, random prompts, greedy requests, and replies compared with
// the same requests on an engine without the cache, which computes every prompt whole.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "../models/model_test_env.hpp"
#include "ninfer/serving/engine.hpp"
#include "ninfer/serving/prefix_cache.hpp"

namespace ninfer::test {

using serving::Engine;
using serving::EngineOptions;
using serving::ServeResult;

// Log-probabilities of the same ids after a prompt read whole and one read partly from shared
// blocks: the CPU plugin accumulates in float64, so only the prefill's chunk boundaries differ.
constexpr double kLogprobTolerance = 1e-4;
constexpr int32_t kBlock = 32;

// `prefix_states`: the prefix cache's Gated DeltaNet state copies (a hybrid model's).
inline std::unique_ptr<CausalLM> model(Backend& be, const Fixture& fx, int32_t slots, int64_t kv_capacity = 0,
                                       int32_t prefix_states = 0) {
  ModelOptions o;
  o.max_context = 256;
  o.max_sequences = slots;
  o.prefill_chunk = 7;
  o.kv_block_tokens = kBlock;
  o.kv_capacity = kv_capacity;
  o.prefix_states = prefix_states;
  return CausalLM::load(fx.checkpoint, be, o);
}

inline std::vector<int32_t> random_ids(const Fixture& fx, size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(fx.vocab) - 1);
  std::vector<int32_t> v(n);
  for (auto& t : v) t = id(rng);
  return v;
}

inline std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

inline GenerationRequest greedy(std::vector<int32_t> prompt, int64_t max_new) {
  GenerationRequest r;
  r.prompt_ids = std::move(prompt);
  r.sampling.temperature = 0;
  r.sampling.top_logprobs = 2;
  r.max_new_tokens = max_new;
  return r;
}

// Twelve greedy requests over `prefixes` taken in turn (a wave of prefixes.size() takes each
// once), each its prefix, a tail of 1 to 8 random tokens (so a prompt's last block boundary stays
// inside its prefix when the prefix ends past one) and 5 to 30 new tokens.
inline std::vector<GenerationRequest> requests_over(const Fixture& fx, const std::vector<std::vector<int32_t>>& prefixes,
                                                    std::mt19937_64& rng) {
  std::vector<GenerationRequest> reqs;
  std::uniform_int_distribution<int64_t> tail(1, 8), new_tokens(5, 30);
  for (size_t i = 0; i < 12; ++i)
    reqs.push_back(greedy(concat(prefixes[i % prefixes.size()], random_ids(fx, static_cast<size_t>(tail(rng)), rng)),
                          new_tokens(rng)));
  return reqs;
}

// The same greedy ids and log-probabilities as `want`, up to the first step whose top two are
// within kGreedyMargin there (a near-tie may flip on rounding).
inline void expect_same_reply(const ServeResult& got, const ServeResult& want, const std::string& what) {
  ASSERT_EQ(got.finish_reason, want.finish_reason) << what << ": " << got.error;
  ASSERT_EQ(got.generated_ids.size(), want.generated_ids.size()) << what;
  for (size_t s = 0; s < want.generated_ids.size(); ++s) {
    const auto& top = want.top_logprobs[s];
    ASSERT_EQ(top.size(), 2u);
    EXPECT_EQ(got.generated_ids[s], want.generated_ids[s]) << what << ", step " << s;
    EXPECT_NEAR(got.logprobs[s], want.logprobs[s], kLogprobTolerance) << what << ", step " << s;
    if (top[0].logprob - top[1].logprob <= kGreedyMargin) break;
  }
}

// Each request alone on a fresh engine without the prefix cache.
inline std::vector<ServeResult> cold_replies(const Fixture& fx, const std::vector<GenerationRequest>& reqs) {
  Backend be = cpu_model_backend();
  auto lm = model(be, fx, 1);
  EngineOptions off;
  off.prefix_cache = false;
  Engine cold(*lm, nullptr, off);
  std::vector<ServeResult> out;
  for (const auto& r : reqs) {
    out.push_back(cold.submit(r)->wait());
    EXPECT_EQ(out.back().cached_tokens, 0);
  }
  return out;
}

// Prefills `ids` into the slot and offers its blocks to the cache, with a state copy after them on
// a recurrent model (`ids` is then a whole number of blocks).
inline void compute_and_offer(CausalLM& lm, serving::PrefixCache& cache, int32_t slot, const std::vector<int32_t>& ids) {
  lm.release_kv(slot);
  lm.prefill(slot, ids);
  if (lm.can_truncate()) {
    cache.offer(slot, ids);
  } else if (const int32_t copy = cache.offer_state(slot, ids); copy >= 0) {
    lm.save_prefix_state(slot, copy);
  }
}

// `reqs` through `engine` in waves of `wave` submitted together, each reply against `want`
// (expect_same_reply); the prompt tokens read from a slot or the cache, summed.
inline int64_t run_waves(Engine& engine, const std::vector<GenerationRequest>& reqs, const std::vector<ServeResult>& want,
                         const std::string& what, size_t wave = 3) {
  int64_t cached = 0;
  for (size_t first = 0; first < reqs.size(); first += wave) {
    const size_t end = std::min(reqs.size(), first + wave);
    std::vector<std::shared_ptr<serving::RequestHandle>> handles;
    for (size_t i = first; i < end; ++i) handles.push_back(engine.submit(reqs[i]));
    for (size_t i = first; i < end; ++i) {
      const ServeResult r = handles[i - first]->wait();
      expect_same_reply(r, want[i], what + ", request " + std::to_string(i));
      cached += r.cached_tokens;
    }
  }
  return cached;
}

} // namespace ninfer::test
