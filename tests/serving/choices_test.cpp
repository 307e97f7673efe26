// Several choices of one request (Engine::submit with `choices`, OpenAI's `n`) on the CPU
// plugin: the prompt is computed once and the further choices copy it (Scheduler::add_fork,
// CausalLM::fork), and each choice still generates, token for token, what its own request
// (n = 1, seed + i) generates on an engine that reads every prompt whole. Checked on a dense and
// a hybrid model, sampled and greedy, with host sampling (penalties), with speculation, with too
// few slots (a choice reads the prompt itself) and a KV pool too small for all the choices at
// once (admission counts shared blocks exactly); a choice whose first choice ends before its
// prompt is read reads it itself. Prompts are drawn fresh every run.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <random>

#include "../models/model_test_env.hpp"
#include "ninfer/generation/scheduler.hpp"
#include "ninfer/serving/engine.hpp"

using namespace ninfer;
using namespace ninfer::serving;
using namespace ninfer::test;

namespace {

constexpr int64_t kContext = 256;

struct Load {
  int32_t slots = 4;
  int64_t kv_capacity = 0;
  int32_t drafts = 0;
};

std::unique_ptr<CausalLM> model(Backend& be, const Checkpoint& ck, const Load& l) {
  ModelOptions o;
  o.max_context = kContext;
  o.max_sequences = l.slots;
  o.prefill_chunk = 16;
  o.kv_block_tokens = 32;
  o.kv_capacity = l.kv_capacity;
  if (l.drafts) o.speculation = {SpecMethod::Mtp, l.drafts};
  return CausalLM::load(ck, be, o);
}

Checkpoint open_checkpoint(const std::string& name) {
  return Checkpoint::open(name.find('/') == std::string::npos ? fixtures_dir() / name : source_dir() / name);
}

std::vector<int32_t> random_prompt(std::mt19937_64& rng, size_t n, int64_t vocab) {
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> p(n);
  for (int32_t& t : p) t = id(rng);
  return p;
}

std::vector<ServeResult> wait_all(const std::vector<std::shared_ptr<RequestHandle>>& handles) {
  std::vector<ServeResult> out;
  for (const auto& h : handles) out.push_back(h->wait());
  return out;
}

// Each choice against its own request run alone, one after another, on a fresh engine of the
// same model that reads every prompt whole: the same ids; log-probabilities within float32
// rounding (a forked choice's first one is the host's log-softmax, the request's the device's).
constexpr double kFirstLogprobRounding = 1e-5;

void expect_each_equals_its_own_request(const Checkpoint& ck, const Load& l, const GenerationRequest& r,
                                        const std::vector<ServeResult>& got) {
  Backend be = cpu_model_backend();
  auto lm = model(be, ck, l);
  EngineOptions whole;
  whole.prefix_cache = false;
  Engine engine(*lm, nullptr, whole);
  for (size_t i = 0; i < got.size(); ++i) {
    GenerationRequest own = r;
    if (own.sampling.seed) own.sampling.seed = *own.sampling.seed + i;
    const ServeResult want = engine.submit(own)->wait();
    ASSERT_EQ(want.finish_reason, "length") << want.error;
    EXPECT_EQ(got[i].finish_reason, "length") << got[i].error;
    EXPECT_EQ(got[i].generated_ids, want.generated_ids) << "choice " << i;
    ASSERT_EQ(got[i].logprobs.size(), want.logprobs.size());
    for (size_t k = 0; k < want.logprobs.size(); ++k)
      EXPECT_NEAR(got[i].logprobs[k], want.logprobs[k], kFirstLogprobRounding) << "choice " << i << " token " << k;
  }
}

GenerationRequest request(std::vector<int32_t> prompt, int64_t max_new, double temperature, uint64_t seed) {
  GenerationRequest r;
  r.prompt_ids = std::move(prompt);
  r.max_new_tokens = max_new;
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  return r;
}

} // namespace

// n = 3 with a free slot for every choice: the prompt's tokens are computed once, choices 1 and 2
// copied it; sampled, each is its own request with seed + i; greedy, all three are the n = 1
// reply; a choice sampled on the host (a repetition penalty) likewise.
TEST(EngineChoices, ThePromptIsComputedOnceAndEachChoiceIsItsOwnRequest) {
  auto rng = fresh_rng("EngineChoices prompts");
  for (const char* name : {"tiny-qwen3", "tiny-qwen3_5"}) {
    SCOPED_TRACE(name);
    const Checkpoint ck = open_checkpoint(name);
    const Load l{};
    const std::vector<int32_t> prompt = random_prompt(rng, 75, ck.config().vocab_size);
    GenerationRequest penalised = request(prompt, 12, 0.8, 41);
    penalised.sampling.repetition_penalty = 1.3;
    for (const GenerationRequest& r :
         {request(prompt, 24, 1.0, 1234), request(prompt, 24, 0.0, 5), penalised}) {
      Backend be = cpu_model_backend();
      auto lm = model(be, ck, l);
      Engine engine(*lm, nullptr);
      const std::vector<ServeResult> got = wait_all(engine.submit(r, {}, 3));
      ASSERT_EQ(got.size(), 3u);
      const SchedulerStats st = engine.stats();
      EXPECT_EQ(st.prompt_tokens, static_cast<int64_t>(prompt.size())) << "the prompt computed once";
      EXPECT_EQ(st.forks, 2);
      EXPECT_EQ(got[0].forked_tokens, 0);
      for (size_t i = 1; i < got.size(); ++i) {
        EXPECT_EQ(got[i].forked_tokens, static_cast<int64_t>(prompt.size()));
        EXPECT_EQ(got[i].cached_tokens, 0);
        EXPECT_EQ(got[i].prompt_tokens, static_cast<int64_t>(prompt.size()));
      }
      if (r.sampling.is_greedy()) {
        EXPECT_EQ(got[1].generated_ids, got[0].generated_ids);
        EXPECT_EQ(got[2].generated_ids, got[0].generated_ids);
      } else {
        EXPECT_NE(got[1].generated_ids, got[0].generated_ids) << "seeds s and s + 1 drew the same reply";
      }
      expect_each_equals_its_own_request(ck, l, r, got);
    }
  }
}

// A speculating model: the forked choices' rounds start from their own first tokens (given by
// the host) and the hidden state forked with the slot; each choice is still its own request.
TEST(EngineChoices, SpeculatingChoicesAreEachTheirOwnRequest) {
  auto rng = fresh_rng("EngineChoices speculation");
  const Checkpoint ck = open_checkpoint("models/qwen3_5-demo");
  const Load l{.slots = 3, .drafts = 3};
  const std::vector<int32_t> prompt = random_prompt(rng, 64, ck.config().vocab_size);
  for (const GenerationRequest& r : {request(prompt, 30, 0.7, 99), request(prompt, 30, 0.0, 1)}) {
    Backend be = cpu_model_backend();
    auto lm = model(be, ck, l);
    Engine engine(*lm, nullptr);
    const std::vector<ServeResult> got = wait_all(engine.submit(r, {}, 3));
    EXPECT_EQ(engine.stats().forks, 2);
    EXPECT_GT(engine.stats().spec_rounds, 0);
    expect_each_equals_its_own_request(ck, l, r, got);
  }
}

// Two slots for three choices: choice 1 copies the prompt, choice 2 waits for a slot and reads the
// prompt itself (an engine without prompt reuse computes it again). A pool of two sequences'
// blocks for three slots, long replies: choice 2 waits for blocks and is admitted by an
// arithmetic that counts blocks the retired choices share exactly.
TEST(EngineChoices, ChoicesWithoutASlotOrBlocksReadThePromptThemselves) {
  auto rng = fresh_rng("EngineChoices short of slots");
  const Checkpoint ck = open_checkpoint("tiny-qwen3_5");
  const std::vector<int32_t> prompt = random_prompt(rng, 75, ck.config().vocab_size);
  {
    const Load l{.slots = 2};
    Backend be = cpu_model_backend();
    auto lm = model(be, ck, l);
    EngineOptions whole;
    whole.prefix_cache = false;
    Engine engine(*lm, nullptr, whole);
    const GenerationRequest r = request(prompt, 20, 1.0, 7);
    const std::vector<ServeResult> got = wait_all(engine.submit(r, {}, 3));
    EXPECT_EQ(engine.stats().forks, 1);
    EXPECT_EQ(engine.stats().prompt_tokens, 2 * static_cast<int64_t>(prompt.size()));
    EXPECT_EQ(got[2].forked_tokens, 0);
    expect_each_equals_its_own_request(ck, l, r, got);
  }
  {
    const Checkpoint dense = open_checkpoint("tiny-qwen3");
    const Load l{.slots = 3, .kv_capacity = 2 * kContext};
    Backend be = cpu_model_backend();
    auto lm = model(be, dense, l);
    EngineOptions whole;
    whole.prefix_cache = false;
    Engine engine(*lm, nullptr, whole);
    ASSERT_EQ(lm->kv_blocks_total(), 16);
    const GenerationRequest r = request(prompt, 150, 1.0, 11); // 225 positions: 8 blocks of 32
    const std::vector<ServeResult> got = wait_all(engine.submit(r, {}, 3));
    EXPECT_EQ(engine.stats().forks, 1) << "the third choice finds no blocks while the first reads its prompt";
    EXPECT_EQ(engine.stats().prompt_tokens, 2 * static_cast<int64_t>(prompt.size()));
    for (const ServeResult& g : got) EXPECT_EQ(g.finish_reason, "length") << g.error;
    expect_each_equals_its_own_request(dense, Load{.slots = 3}, r, got);
  }
}

// The scheduler's own contract: a sequence waiting to copy a prompt whose sequence ends first (a
// cancelled first choice) reads the prompt itself; add_fork refuses what it cannot copy.
TEST(EngineChoices, AForkWhoseSourceEndsEarlyReadsThePromptItself) {
  auto rng = fresh_rng("EngineChoices early end");
  const Checkpoint ck = open_checkpoint("tiny-qwen3");
  const std::vector<int32_t> prompt = random_prompt(rng, 50, ck.config().vocab_size);
  Backend be = cpu_model_backend();
  auto lm = model(be, ck, {});
  const GenerationRequest r = request(prompt, 10, 0.0, 1);
  std::vector<int32_t> want;
  {
    Scheduler loop(*lm);
    loop.add(0, r, {.on_end = [&](SequenceOutcome& o) { want = o.generated_ids; }});
    while (loop.busy()) loop.step();
  }
  Scheduler loop(*lm);
  bool cancel_first = false;
  SequenceOutcome first, copy;
  loop.add(2, r, {.on_end = [&](SequenceOutcome& o) { first = o; }, .cancelled = [&] { return cancel_first; }});
  loop.add_fork(2, 3, r, {.on_end = [&](SequenceOutcome& o) { copy = o; }});
  EXPECT_TRUE(loop.reading_prompt(2));
  EXPECT_FALSE(loop.reading_prompt(3)) << "a sequence waiting to copy a prompt reads none yet";
  GenerationRequest longer = r;
  longer.prompt_ids.push_back(3);
  EXPECT_NE(error_of([&] { loop.add_fork(2, 1, longer, {}); }).find("ends its prompt at position 50"),
            std::string::npos);
  EXPECT_NE(error_of([&] { loop.add_fork(0, 1, r, {}); }).find("slot 0 holds no sequence"), std::string::npos);
  cancel_first = true;
  while (loop.busy()) loop.step();
  EXPECT_EQ(first.finish_reason, "cancelled");
  EXPECT_EQ(copy.finish_reason, "length") << copy.error;
  EXPECT_EQ(copy.forked_tokens, 0) << "it read its prompt";
  EXPECT_EQ(copy.generated_ids, want);
  EXPECT_EQ(loop.stats().forks, 0);
  EXPECT_EQ(loop.stats().prompt_tokens, static_cast<int64_t>(prompt.size()));
}
