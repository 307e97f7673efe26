// The engine loop (generation::Scheduler, CPU plugin) on a model that speculates: greedy and
// seeded-sampled requests decode in speculative rounds, several of them per round at different
// acceptance lengths, joining and leaving while others run; host-sampled requests keep decoding
// one token per step beside them. Each request equals the same request through the loop on a
// model without speculation (itself held to independent references by EngineLoop.* and
// MixedSteps.*), token for token (a sampled round draws the very tokens sampled decode draws with
// the same seed) and, for requests picked on the device, log-probability bit for bit: a
// verification pass runs a decode step's ops (the fused Gated DeltaNet step walks its tokens),
// so nothing but the rounds differs. A stop token or the length ends a
// request inside a round exactly where it ends it alone.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <random>

#include "../models/model_test_env.hpp"
#include "ninfer/generation/scheduler.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

constexpr const char* kDemo = "models/qwen3_5-demo";
constexpr int64_t kContext = 256;
// Prompts go in chunks of 16 whether others decode or not: a round takes other iterations than
// steps, so the sequences beside a prompt differ between the two loops, and only chunks that
// fall at the same positions give the same bits (a mixed step computes its chunk's rows as the
// chunk alone: MixedStep.RowsComputeBitForBitAsInStepsOfOneKind).
constexpr int32_t kPrefillChunk = 16;
constexpr int32_t kMixedChunk = kPrefillChunk;

std::unique_ptr<CausalLM> model(Backend& be, const Checkpoint& ck, int32_t slots, int32_t drafts,
                                int32_t max_batch = 0) {
  ModelOptions o;
  o.max_context = kContext;
  o.max_sequences = slots;
  o.prefill_chunk = kPrefillChunk;
  o.mixed_chunk = kMixedChunk;
  if (drafts) o.speculation = {SpecMethod::Mtp, drafts, 0, max_batch};
  return CausalLM::load(ck, be, o);
}

// Requests added at the iterations given (0: before the first), at most `slots` at once (a
// request waits for a free slot), each in the lowest free slot.
std::vector<SequenceOutcome> run_loop(CausalLM& lm, const std::vector<GenerationRequest>& requests,
                                      const std::vector<int64_t>& join_at, SchedulerStats* stats = nullptr) {
  Scheduler loop(lm);
  std::vector<SequenceOutcome> out(requests.size());
  std::vector<bool> ended(requests.size(), false), started(requests.size(), false);
  std::vector<int32_t> slot_of(requests.size(), -1);
  const int32_t slots = lm.options().max_sequences;
  int64_t iteration = 0;
  auto free_slot = [&]() -> int32_t {
    for (int32_t s = 0; s < slots; ++s) {
      bool used = false;
      for (size_t i = 0; i < requests.size(); ++i) used = used || (started[i] && !ended[i] && slot_of[i] == s);
      if (!used) return s;
    }
    return -1;
  };
  for (;;) {
    for (size_t i = 0; i < requests.size(); ++i) {
      if (started[i] || join_at[i] > iteration) continue;
      const int32_t s = free_slot();
      if (s < 0) break;
      started[i] = true;
      slot_of[i] = s;
      SequenceHooks h;
      h.on_end = [&, i](SequenceOutcome& o) {
        out[i] = std::move(o);
        ended[i] = true;
      };
      loop.add(s, requests[i], std::move(h));
    }
    if (!loop.busy() && std::all_of(started.begin(), started.end(), [](bool b) { return b; })) break;
    if (loop.busy()) loop.step();
    ++iteration;
  }
  if (stats) *stats = loop.stats();
  return out;
}

std::vector<GenerationRequest> requests_of(const Fixture& demo) {
  std::mt19937_64 rng(11);
  std::vector<GenerationRequest> r;
  auto greedy = [&](std::vector<int32_t> prompt, int64_t n) {
    GenerationRequest q;
    q.prompt_ids = std::move(prompt);
    q.sampling.temperature = 0;
    q.max_new_tokens = n;
    return q;
  };
  const auto& a = demo.cases[0].prompt;
  const auto& b = demo.cases[1].prompt;
  r.push_back(greedy(a, 40));
  r.push_back(greedy(b, 25));
  r.push_back(greedy({a.begin(), a.begin() + 5}, 33));
  GenerationRequest sampled = greedy(b, 20); // speculates: its picks are the sample op's
  sampled.sampling.temperature = 0.8;
  sampled.sampling.top_k = 40;
  sampled.sampling.seed = 5;
  r.push_back(sampled);
  GenerationRequest penalised = greedy(a, 12); // sampled on the host from its logits row
  penalised.sampling.repetition_penalty = 1.3;
  r.push_back(penalised);
  r.push_back(greedy({b.begin() + 3, b.end()}, 1));
  r.push_back(greedy({a.begin() + 2, a.end()}, 29));
  r.push_back(greedy({7}, 18));
  return r;
}

} // namespace

// Eight requests (five greedy of 1 to 40 tokens, one with a stop token found in its own
// continuation, a seeded sampled one and one with a repetition penalty, sampled on the host)
// joining at iterations
// 0 to 9 on 1, 2 and 4 slots, K = 1, 3, 5: each equals its run on the loop without speculation.
TEST(SpeculativeLoop, RequestsEqualTheLoopWithoutSpeculation) {
  const Fixture demo = Fixture::load(kDemo);
  std::vector<GenerationRequest> requests = requests_of(demo);
  const std::vector<int64_t> join_at{0, 0, 1, 2, 3, 5, 7, 9};
  Backend plain_be = cpu_model_backend();
  auto plain = model(plain_be, demo.checkpoint, 4, 0);
  // A stop token inside request 6's continuation, so a round ends it mid-way.
  const std::vector<SequenceOutcome> probe = run_loop(*plain, requests, join_at);
  ASSERT_GT(probe[6].generated_ids.size(), 12u);
  requests[6].stop.token_ids.insert(probe[6].generated_ids[11]);
  const std::vector<SequenceOutcome> want = run_loop(*plain, requests, join_at);
  ASSERT_EQ(want[6].finish_reason, "stop");
  for (int32_t K : {1, 3, 5})
    for (int32_t slots : {1, 2, 4}) {
      Backend be = cpu_model_backend();
      auto spec = model(be, demo.checkpoint, slots, K);
      SchedulerStats stats;
      const std::vector<SequenceOutcome> got = run_loop(*spec, requests, join_at, &stats);
      const std::string what = fmt::format("K {} slots {}", K, slots);
      for (size_t i = 0; i < requests.size(); ++i) {
        EXPECT_EQ(got[i].generated_ids, want[i].generated_ids) << what << " request " << i;
        EXPECT_EQ(got[i].finish_reason, want[i].finish_reason) << what << " request " << i;
        EXPECT_EQ(got[i].stop_token, want[i].stop_token) << what << " request " << i;
        // Requests picked on the device (greedy or sampled) speculate, the penalised one (sampled
        // on the host) decodes step by step; the device's picks carry their log-probabilities.
        const bool on_device = requests[i].sampling.repetition_penalty == 1.0;
        if (on_device && got[i].generated_logprobs.size() == want[i].generated_logprobs.size())
          EXPECT_EQ(std::memcmp(got[i].generated_logprobs.data(), want[i].generated_logprobs.data(),
                                sizeof(float) * want[i].generated_logprobs.size()),
                    0)
              << what << " request " << i << ": log-probabilities";
        if (on_device && got[i].generated_ids.size() > 1) EXPECT_GT(got[i].spec.rows, 0) << what << " request " << i;
        if (!on_device) EXPECT_EQ(got[i].spec.rows, 0) << what << " request " << i;
      }
      EXPECT_GT(stats.spec_rounds, 0) << what;
      EXPECT_GT(stats.spec.accepted_at.at(0), 0) << what << ": no draft was ever accepted";
      std::string by_position;
      for (size_t j = 0; j < stats.spec.accepted_at.size(); ++j) by_position += fmt::format(" {:.2f}", stats.spec.acceptance(j));
      std::printf("%s: %lld rounds, %lld rows, acceptance by position%s, mean accepted length %.2f\n", what.c_str(),
                  static_cast<long long>(stats.spec_rounds), static_cast<long long>(stats.spec.rows),
                  by_position.c_str(), stats.spec.mean_accepted_length());
    }
}

// Speculation::max_batch: rounds pause while more sequences decode than the cap. Two greedy
// requests on a cap of 1: the first decodes alone (in rounds) while the second's prompt is read,
// then both decode, and the second's 6 tokens end before the first's 40, so the second never
// takes part in a round and the first takes rounds again once alone; without the cap both do.
// Either way every request equals the loop without speculation.
TEST(SpeculativeLoop, RoundsPauseWhileMoreSequencesDecodeThanTheCap) {
  const Fixture demo = Fixture::load(kDemo);
  const std::vector<GenerationRequest> all = requests_of(demo);
  std::vector<GenerationRequest> requests{all[0], all[1]}; // greedy
  requests[1].max_new_tokens = 6;
  const std::vector<int64_t> join_at{0, 0};
  Backend plain_be = cpu_model_backend();
  auto plain = model(plain_be, demo.checkpoint, 2, 0);
  const std::vector<SequenceOutcome> want = run_loop(*plain, requests, join_at);
  for (const int32_t cap : {1, 2, 0}) {
    Backend be = cpu_model_backend();
    auto spec = model(be, demo.checkpoint, 2, 3, cap);
    SchedulerStats stats;
    const std::vector<SequenceOutcome> got = run_loop(*spec, requests, join_at, &stats);
    const std::string what = fmt::format("cap {}", cap);
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(got[i].generated_ids, want[i].generated_ids) << what << " request " << i;
      EXPECT_EQ(got[i].finish_reason, want[i].finish_reason) << what << " request " << i;
    }
    EXPECT_GT(got[0].spec.rows, 0) << what << ": the longer request decodes alone at the end";
    if (cap == 1) EXPECT_EQ(got[1].spec.rows, 0) << what << ": the shorter one never decoded alone";
    else EXPECT_GT(got[1].spec.rows, 0) << what;
    EXPECT_GT(stats.spec_rounds, 0) << what;
  }
  // The cap needs a speculation method.
  ModelOptions o;
  o.max_context = kContext;
  o.speculation.max_batch = 1;
  Backend be = cpu_model_backend();
  EXPECT_THROW(CausalLM::load(demo.checkpoint, be, o), Error);
}

namespace {

// The first five requests of requests_of (greedy, seeded-sampled, host-sampled) with thinking
// budgets of 1 to 9 tokens ending with `end_id`.
std::vector<GenerationRequest> budgeted_requests(const Fixture& demo, int32_t end_id) {
  std::vector<GenerationRequest> r = requests_of(demo);
  r.resize(5);
  const int64_t budgets[] = {7, 3, 9, 1, 5};
  for (size_t i = 0; i < r.size(); ++i) r[i].thinking_budget = GenerationRequest::ThinkingBudget{budgets[i], end_id};
  return r;
}

// A token none of the outcomes holds in its first `n` ids.
int32_t unused_token(const std::vector<SequenceOutcome>& runs, int64_t vocab, size_t n) {
  for (int32_t id = static_cast<int32_t>(vocab) - 1; id >= 0; --id) {
    bool seen = false;
    for (const SequenceOutcome& o : runs)
      for (size_t k = 0; k < std::min(n, o.generated_ids.size()); ++k) seen = seen || o.generated_ids[k] == id;
    if (!seen) return id;
  }
  return -1;
}

} // namespace

// A thinking budget: each request generates its unbudgeted tokens up to the budget, then the end
// token (logprob 0, not sampled), then what the model continues with; a request whose own
// continuation holds the end token within its budget is unchanged. Rounds that could reach the
// forced token give way to one-token steps, so a speculating model generates the same.
TEST(SpeculativeLoop, ThinkingBudgetForcesTheEndTokenWithAndWithoutSpeculation) {
  const Fixture demo = Fixture::load(kDemo);
  Backend plain_be = cpu_model_backend();
  auto plain = model(plain_be, demo.checkpoint, 2, 0);
  std::vector<GenerationRequest> free = requests_of(demo);
  free.resize(5);
  const std::vector<int64_t> join_at{0, 0, 1, 2, 3};
  const std::vector<SequenceOutcome> unbudgeted = run_loop(*plain, free, join_at);
  const int32_t end_id = unused_token(unbudgeted, demo.vocab, 10);
  ASSERT_GE(end_id, 0);
  std::vector<GenerationRequest> requests = budgeted_requests(demo, end_id);
  // Request 2 closes its block by itself: its own third token is its end token.
  ASSERT_GT(unbudgeted[2].generated_ids.size(), 9u);
  requests[2].thinking_budget = GenerationRequest::ThinkingBudget{9, unbudgeted[2].generated_ids[2]};
  const std::vector<SequenceOutcome> want = run_loop(*plain, requests, join_at);
  for (size_t i : {0, 1, 3, 4}) {
    const size_t b = static_cast<size_t>(requests[i].thinking_budget->tokens);
    ASSERT_GT(want[i].generated_ids.size(), b) << "request " << i;
    EXPECT_EQ(std::vector<int32_t>(want[i].generated_ids.begin(), want[i].generated_ids.begin() + b),
              std::vector<int32_t>(unbudgeted[i].generated_ids.begin(), unbudgeted[i].generated_ids.begin() + b))
        << "request " << i << ": the tokens before the budget";
    EXPECT_EQ(want[i].generated_ids[b], end_id) << "request " << i;
    EXPECT_EQ(want[i].generated_logprobs[b], 0.0f) << "request " << i << ": a forced token's logprob";
    EXPECT_EQ(want[i].generated_ids.size(), unbudgeted[i].generated_ids.size()) << "request " << i;
  }
  EXPECT_EQ(want[2].generated_ids, unbudgeted[2].generated_ids) << "a block closed within its budget";
  for (int32_t K : {1, 3}) {
    Backend be = cpu_model_backend();
    auto spec = model(be, demo.checkpoint, 2, K);
    const std::vector<SequenceOutcome> got = run_loop(*spec, requests, join_at);
    for (size_t i = 0; i < requests.size(); ++i)
      EXPECT_EQ(got[i].generated_ids, want[i].generated_ids) << "K " << K << " request " << i;
  }
}

// After the forced end token the model continues as if the end token were the prompt's last:
// the budgeted request's tokens after it equal greedy decoding of prompt + its first tokens + the
// end token read as a prompt, up to the first near-tie of that reference (prefill and decode sum
// in other orders).
TEST(SpeculativeLoop, ThinkingBudgetContinuesAsIfTheEndTokenWereInThePrompt) {
  const Fixture demo = Fixture::load(kDemo);
  Backend be = cpu_model_backend();
  auto lm = model(be, demo.checkpoint, 1, 0);
  GenerationRequest r;
  r.prompt_ids = demo.cases[0].prompt;
  r.sampling.temperature = 0;
  r.max_new_tokens = 30;
  const SequenceOutcome free = run_loop(*lm, {r}, {0})[0];
  const int32_t end_id = unused_token({free}, demo.vocab, 30);
  r.thinking_budget = GenerationRequest::ThinkingBudget{6, end_id};
  const SequenceOutcome got = run_loop(*lm, {r}, {0})[0];
  ASSERT_EQ(got.generated_ids.size(), 30u);
  GenerationRequest ref;
  ref.prompt_ids = r.prompt_ids;
  ref.prompt_ids.insert(ref.prompt_ids.end(), got.generated_ids.begin(), got.generated_ids.begin() + 7);
  ASSERT_EQ(ref.prompt_ids.back(), end_id);
  ref.sampling.temperature = 0;
  ref.sampling.top_logprobs = 2;
  ref.max_new_tokens = 23;
  const SequenceOutcome want = run_loop(*lm, {ref}, {0})[0];
  ASSERT_EQ(want.generated_ids.size(), 23u);
  for (size_t k = 0; k < 23; ++k) {
    if (want.generated_top[k][0].logprob - want.generated_top[k][1].logprob <= kGreedyMargin) break;
    EXPECT_EQ(got.generated_ids[7 + k], want.generated_ids[k]) << "token " << 7 + k;
  }
}
