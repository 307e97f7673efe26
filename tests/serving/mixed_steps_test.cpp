// The engine loop's mixed steps (generation::Scheduler on the CPU plugin): while sequences
// decode, a prompt is read in chunks of mixed_chunk tokens inside their steps. Every request
// equals the same request alone through an independent reference (a model of its own: the
// prompt prefilled in the same pieces the loop read it in, every token sampled on the host by a
// Sampler from logits brought back one step at a time), on the dense and the hybrid fixture:
// several prompts waiting, one ending inside a mixed step, prompt logprobs of chunks read in
// mixed steps, host-sampled rows, cancellations during mixed steps and a slot reused after one.
// From the loop's own events: a decoding stream gets exactly one token per mixed step, and
// chunks are mixed_chunk long beside decoding streams, prefill_chunk long alone.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <random>

#include "../models/model_test_env.hpp"
#include "ninfer/generation/scheduler.hpp"
#include "ninfer/sampling/logits_processing.hpp"
#include "ninfer/sampling/sampler.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

// A picked token's raw log-probability from the sample op or argmax on the CPU plugin (double
// sums over the row, stored as float) against the host Sampler's float64 log-softmax.
constexpr double kPickLogprobTol = 1e-5;
constexpr int64_t kContext = 256;
constexpr int32_t kPrefillChunk = 16;
constexpr int32_t kMixedChunk = 5;

std::unique_ptr<CausalLM> model(Backend& be, const Fixture& fx, int32_t slots) {
  ModelOptions o;
  o.max_context = kContext;
  o.max_sequences = slots;
  o.prefill_chunk = kPrefillChunk;
  o.mixed_chunk = kMixedChunk;
  return CausalLM::load(fx.checkpoint, be, o);
}

// What the loop did, in order: a chunk queued (its sequence, prompt tokens done) or a token read.
struct Event {
  enum Kind { Chunk, Token } kind;
  size_t seq;
  int64_t value; // Chunk: tokens done; Token: the id
};

// The loop with its requests' hooks recording into one event list; requests are added between
// iterations (also from hooks, through `later`).
struct Loop {
  CausalLM& lm;
  Scheduler scheduler;
  std::vector<GenerationRequest> requests;
  std::vector<SequenceOutcome> outcomes;
  std::vector<bool> ended;
  std::vector<std::shared_ptr<bool>> cancel;
  std::vector<Event> events;
  std::vector<std::function<void()>> later;
  std::function<void()> between; // before every iteration
  // Per request: called after each event of that request (to cancel it, add others, ...).
  std::map<size_t, std::function<void(const Event&)>> watch;

  explicit Loop(CausalLM& m) : lm(m), scheduler(m) {}

  size_t add(int32_t slot, GenerationRequest r) {
    const size_t i = requests.size();
    requests.push_back(r);
    outcomes.emplace_back();
    ended.push_back(false);
    cancel.push_back(std::make_shared<bool>(false));
    SequenceHooks h;
    h.on_prefill = [this, i](int64_t done, int64_t) { note({Event::Chunk, i, done}); };
    h.on_token = [this, i](const SampleResult& t) {
      note({Event::Token, i, t.token});
      return false;
    };
    h.on_end = [this, i](SequenceOutcome& o) {
      outcomes[i] = o;
      ended[i] = true;
    };
    h.cancelled = [flag = cancel[i]] { return *flag; };
    scheduler.add(slot, std::move(r), std::move(h));
    return i;
  }
  void note(const Event& e) {
    events.push_back(e);
    if (const auto it = watch.find(e.seq); it != watch.end()) it->second(e);
  }
  void run() {
    while (scheduler.busy() || !later.empty()) {
      auto pending = std::move(later);
      later.clear();
      for (auto& f : pending) f();
      if (between) between();
      if (scheduler.busy()) scheduler.step();
    }
  }
  // The prompt pieces request i was read in (each chunk's end).
  std::vector<int64_t> chunk_ends(size_t i) const {
    std::vector<int64_t> out;
    for (const Event& e : events)
      if (e.kind == Event::Chunk && e.seq == i) out.push_back(e.value);
    return out;
  }
};

struct Reference {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  std::vector<std::vector<TokenLogprob>> prompt_top;
};

// The request alone on `lm`: its prompt prefilled in the pieces ending at `ends`, then one token
// at a time sampled on the host from that step's logits row (nothing when the loop did not read
// the whole prompt).
Reference alone(CausalLM& lm, const GenerationRequest& r, const std::vector<int64_t>& ends) {
  lm.reset(0);
  Reference out;
  std::vector<float> logits;
  int64_t at = 0;
  const int64_t V = lm.vocab_size();
  for (int64_t end : ends) {
    const auto piece = std::span(r.prompt_ids).subspan(static_cast<size_t>(at), static_cast<size_t>(end - at));
    logits = lm.prefill(0, piece, r.prompt_logprobs > 0 ? LogitsFor::All : LogitsFor::Last);
    if (r.prompt_logprobs > 0) {
      for (int64_t i = 0; i < end - at; ++i) {
        const auto row = std::span(logits).subspan(static_cast<size_t>(i * V), static_cast<size_t>(V));
        out.prompt_top.push_back(top_logprobs(row, log_sum_exp(row), r.prompt_logprobs));
      }
      logits = row(logits, end - at - 1, V);
    }
    at = end;
  }
  if (at != static_cast<int64_t>(r.prompt_ids.size())) return out; // the prompt was not read whole
  Sampler sampler(r.sampling, r.prompt_ids);
  const int64_t limit = std::min<int64_t>(r.max_new_tokens, kContext - static_cast<int64_t>(r.prompt_ids.size()));
  for (int64_t n = 0; n < limit; ++n) {
    const SampleResult s = sampler.next(logits);
    if (r.stop.is_stop_token(s.token)) break;
    out.ids.push_back(s.token);
    out.logprobs.push_back(s.logprob);
    if (n + 1 < limit) logits = decode_logits(lm, std::vector<int32_t>{0}, std::vector<int32_t>{s.token});
  }
  return out;
}

// Whole (finished "length") or a prefix (cancelled) of its run alone.
void expect_alone(const Loop& loop, size_t i, CausalLM& ref, const std::string& what) {
  const SequenceOutcome& got = loop.outcomes[i];
  const Reference want = alone(ref, loop.requests[i], loop.chunk_ends(i));
  if (got.finish_reason == "cancelled") {
    ASSERT_LE(got.generated_ids.size(), want.ids.size()) << what;
    EXPECT_TRUE(std::equal(got.generated_ids.begin(), got.generated_ids.end(), want.ids.begin()))
        << what << ": a cancelled request's tokens are a prefix of its tokens alone";
    return;
  }
  EXPECT_EQ(got.finish_reason, "length") << what << ": " << got.error;
  EXPECT_EQ(got.generated_ids, want.ids) << what;
  ASSERT_EQ(got.generated_logprobs.size(), want.logprobs.size()) << what;
  for (size_t k = 0; k < want.logprobs.size(); ++k)
    EXPECT_NEAR(got.generated_logprobs[k], want.logprobs[k], kPickLogprobTol) << what << " token " << k;
  ASSERT_EQ(got.prompt_top.size(), want.prompt_top.size()) << what;
  for (size_t p = 0; p < want.prompt_top.size(); ++p) {
    ASSERT_EQ(got.prompt_top[p].size(), want.prompt_top[p].size()) << what << " prompt position " << p;
    for (size_t k = 0; k < want.prompt_top[p].size(); ++k) {
      EXPECT_EQ(got.prompt_top[p][k].id, want.prompt_top[p][k].id) << what << " prompt position " << p;
      EXPECT_NEAR(got.prompt_top[p][k].logprob, want.prompt_top[p][k].logprob, kPickLogprobTol) << what;
    }
  }
}

GenerationRequest request(const Fixture& fx, std::mt19937_64& rng, size_t prompt, int64_t new_tokens) {
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(fx.vocab) - 1);
  GenerationRequest r;
  r.prompt_ids.resize(prompt);
  for (auto& t : r.prompt_ids) t = id(rng);
  r.max_new_tokens = new_tokens;
  r.sampling.temperature = 0;
  return r;
}

// Tokens of `stream` read between consecutive chunk events, counted over the stretch where the
// stream is mid-way (a token of it before the first chunk event and after the last).
std::vector<int64_t> tokens_between_chunks(const std::vector<Event>& events, size_t stream) {
  std::vector<size_t> chunks;
  size_t first_token = SIZE_MAX, last_token = 0;
  for (size_t k = 0; k < events.size(); ++k) {
    if (events[k].kind == Event::Chunk) chunks.push_back(k);
    if (events[k].kind == Event::Token && events[k].seq == stream) {
      first_token = std::min(first_token, k);
      last_token = k;
    }
  }
  std::vector<int64_t> out;
  for (size_t c = 0; c + 1 < chunks.size(); ++c) {
    if (chunks[c] < first_token || chunks[c + 1] > last_token) continue;
    int64_t n = 0;
    for (size_t k = chunks[c]; k < chunks[c + 1]; ++k) n += events[k].kind == Event::Token && events[k].seq == stream;
    out.push_back(n);
  }
  return out;
}

} // namespace

// Three streams decode (greedy, seeded, one sampled on the host for its repetition penalty);
// once the first has tokens, two long prompts arrive (the second waits for the first; it asks
// for prompt logprobs, and the first prompt's last chunk is 2 tokens). Every request equals its
// run alone; the prompts were read only in chunks of mixed_chunk, in mixed steps; each stream
// picked on the backend got exactly one token per step while they were read.
TEST(MixedSteps, PromptsReadBesideDecodingStreamsEqualEachAloneAndTheStreamsGetATokenPerStep) {
  for (const char* name : {"tiny-qwen3", "tiny-qwen3_5"}) {
    const Fixture fx = Fixture::load(name);
    Backend be = cpu_model_backend();
    auto ref = model(be, fx, 1);
    auto lm = model(be, fx, 5);
    auto rng = fresh_rng(fmt::format("mixed steps {}", name).c_str());
    Loop loop(*lm);
    GenerationRequest greedy = request(fx, rng, 9, 60);
    GenerationRequest seeded = request(fx, rng, 3, 60);
    GenerationRequest host = request(fx, rng, 5, 30);
    seeded.sampling.temperature = 0.9, seeded.sampling.top_k = 50, seeded.sampling.seed = 11;
    host.sampling.temperature = 1.1, host.sampling.seed = 12, host.sampling.repetition_penalty = 1.3;
    GenerationRequest first_prompt = request(fx, rng, 72, 5);
    GenerationRequest second_prompt = request(fx, rng, 50, 4);
    second_prompt.sampling.temperature = 0.7, second_prompt.sampling.seed = 13;
    second_prompt.prompt_logprobs = 2;
    const size_t s_greedy = loop.add(0, greedy);
    const size_t s_seeded = loop.add(1, seeded);
    const size_t s_host = loop.add(2, host);
    size_t l1 = SIZE_MAX, l2 = SIZE_MAX;
    loop.watch[s_greedy] = [&](const Event& e) {
      if (e.kind != Event::Token || l1 != SIZE_MAX) return;
      l1 = SIZE_MAX - 1; // once
      loop.later.push_back([&] {
        l1 = loop.add(3, first_prompt);
        l2 = loop.add(4, second_prompt);
      });
    };
    loop.run();
    ASSERT_NE(l2, SIZE_MAX);
    for (size_t i = 0; i < loop.requests.size(); ++i)
      expect_alone(loop, i, *ref, fmt::format("{} request {}", name, i));
    EXPECT_GT(loop.scheduler.stats().mixed_steps, 0) << name;
    // Both prompts were read beside decoding streams: chunks of mixed_chunk, the last 72 - 70.
    for (size_t l : {l1, l2}) {
      const auto size = static_cast<int64_t>(loop.requests[l].prompt_ids.size());
      int64_t before = 0;
      for (int64_t end : loop.chunk_ends(l)) {
        EXPECT_EQ(end - before, std::min<int64_t>(kMixedChunk, size - before)) << name << " request " << l;
        before = end;
      }
    }
    EXPECT_EQ(loop.chunk_ends(l1).back() - loop.chunk_ends(l1).end()[-2], 2) << name;
    for (size_t stream : {s_greedy, s_seeded}) {
      const std::vector<int64_t> per_step = tokens_between_chunks(loop.events, stream);
      ASSERT_GE(per_step.size(), 15u) << name << ": the streams decoded through both prompts";
      for (size_t k = 0; k < per_step.size(); ++k)
        EXPECT_EQ(per_step[k], 1) << name << " stream " << stream << ", between chunk events " << k << " and " << k + 1;
    }
    EXPECT_GT(loop.outcomes[s_host].generated_ids.size(), 0u);
  }
}

// With nobody decoding, a prompt is read in chunks of prefill_chunk and no step is mixed.
TEST(MixedSteps, APromptAloneIsReadInPrefillChunks) {
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  Backend be = cpu_model_backend();
  auto ref = model(be, fx, 1);
  auto lm = model(be, fx, 3);
  auto rng = fresh_rng("mixed steps alone");
  Loop loop(*lm);
  const size_t l = loop.add(1, request(fx, rng, 40, 6));
  loop.run();
  EXPECT_EQ(loop.chunk_ends(l), (std::vector<int64_t>{16, 32, 40}));
  EXPECT_EQ(loop.scheduler.stats().mixed_steps, 0);
  expect_alone(loop, l, *ref, "the prompt alone");
}

// Cancellations during mixed steps: a prompt cancelled while it is read beside a stream, and a
// stream cancelled while another prompt is read beside it. The cancelled requests hold a prefix
// of their tokens alone; the others, and a request put in the freed slot at once (on the hybrid
// fixture, whose slot state the steps still queued touch), equal theirs.
TEST(MixedSteps, CancellationDuringMixedStepsLeavesTheOthersAndTheSlotIntact) {
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  Backend be = cpu_model_backend();
  auto ref = model(be, fx, 1);
  auto lm = model(be, fx, 3);
  auto rng = fresh_rng("mixed steps cancel");
  Loop loop(*lm);
  const size_t stream = loop.add(0, request(fx, rng, 4, 80));
  GenerationRequest doomed_prompt = request(fx, rng, 60, 5);
  GenerationRequest doomed_stream = request(fx, rng, 6, 80);
  GenerationRequest next_prompt = request(fx, rng, 30, 8);
  GenerationRequest in_freed_slot = request(fx, rng, 12, 10);
  in_freed_slot.sampling.temperature = 0.8, in_freed_slot.sampling.seed = 5;
  size_t doomed = SIZE_MAX, doomed_s = SIZE_MAX, next = SIZE_MAX, freed = SIZE_MAX;
  loop.watch[stream] = [&](const Event& e) {
    if (e.kind == Event::Token && doomed == SIZE_MAX) {
      doomed = SIZE_MAX - 1;
      loop.later.push_back([&] {
        doomed = loop.add(1, doomed_prompt);
        doomed_s = loop.add(2, doomed_stream);
        // The prompt: cancelled after its third mixed chunk. Then a stream beside the next prompt.
        loop.watch[doomed] = [&](const Event& c) {
          if (c.kind == Event::Chunk && c.value == 3 * kMixedChunk) *loop.cancel[doomed] = true;
        };
        loop.watch[doomed_s] = [&](const Event& t) {
          if (t.kind != Event::Token || next != SIZE_MAX) return;
          next = SIZE_MAX - 1;
          loop.later.push_back([&] {
            next = loop.add(1, next_prompt);
            loop.watch[next] = [&](const Event& c) {
              if (c.kind == Event::Chunk && c.value == 2 * kMixedChunk) *loop.cancel[doomed_s] = true;
            };
          });
        };
      });
    }
  };
  // The cancelled stream's slot takes another request at once.
  loop.between = [&] {
    if (doomed_s < loop.requests.size() && loop.ended[doomed_s] && freed == SIZE_MAX)
      freed = loop.add(2, in_freed_slot);
  };
  loop.run();
  ASSERT_LT(freed, loop.requests.size());
  EXPECT_EQ(loop.outcomes[doomed].finish_reason, "cancelled");
  EXPECT_EQ(loop.outcomes[doomed_s].finish_reason, "cancelled");
  EXPECT_EQ(loop.chunk_ends(doomed), (std::vector<int64_t>{5, 10, 15})) << "cancelled after its third mixed chunk";
  EXPECT_EQ(loop.chunk_ends(next), (std::vector<int64_t>{5, 10, 15, 20, 25, 30})) << "read in mixed chunks";
  EXPECT_GT(loop.outcomes[doomed_s].generated_ids.size(), 0u);
  EXPECT_LT(loop.outcomes[doomed_s].generated_ids.size(), 80u);
  EXPECT_GT(loop.scheduler.stats().mixed_steps, 0);
  for (size_t i : {stream, doomed_s, next, freed}) expect_alone(loop, i, *ref, fmt::format("request {}", i));
}
