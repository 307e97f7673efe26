// The engine loop as the server drives it (serving::Engine over generation::Scheduler, CPU
// plugin): however requests join, leave, mix device and host sampling, are cancelled or wait
// beside a long prompt, each one's tokens equal that request run alone through an independent
// reference: its prompt prefilled on a model of its own, every token sampled on the host by a
// Sampler from logits brought back one step at a time (no loop, no picks on the backend). The
// same seed gives the same tokens because the sample op and the host Sampler use the same draws
// (docs/sampling.md).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <thread>

#include "../models/model_test_env.hpp"
#include "ninfer/sampling/sampler.hpp"
#include "ninfer/serving/engine.hpp"

using namespace ninfer;
using namespace ninfer::serving;
using namespace ninfer::test;

namespace {

// A token's raw log-probability from the sample op or argmax on the CPU plugin (double sums
// over the row, stored as float) against the host Sampler's float64 log-softmax.
constexpr double kPickLogprobTol = 1e-5;
constexpr int64_t kContext = 256;
constexpr int32_t kChunk = 7; // prompts of the fixtures span several chunks

std::unique_ptr<CausalLM> model(Backend& be, const Fixture& fx, int32_t slots) {
  return fixture_model(be, fx, kContext, slots, kChunk);
}

struct Reference {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  std::vector<std::vector<TokenLogprob>> top;
};

// The request alone: prefill on `lm` (same chunk size), then one token at a time sampled on the
// host from that step's logits row.
Reference alone(CausalLM& lm, const GenerationRequest& r) {
  lm.reset(0);
  std::vector<float> logits = lm.prefill(0, r.prompt_ids);
  Sampler sampler(r.sampling, r.prompt_ids);
  Reference out;
  const int64_t limit = std::min<int64_t>(r.max_new_tokens, kContext - static_cast<int64_t>(r.prompt_ids.size()));
  for (int64_t n = 0; n < limit; ++n) {
    const SampleResult s = sampler.next(logits);
    if (r.stop.is_stop_token(s.token)) break;
    out.ids.push_back(s.token);
    out.logprobs.push_back(s.logprob);
    out.top.push_back(s.top_logprobs);
    if (n + 1 < limit) logits = decode_logits(lm, std::vector<int32_t>{0}, std::vector<int32_t>{s.token});
  }
  return out;
}

void expect_same(const ServeResult& got, const Reference& want, const std::string& what) {
  EXPECT_EQ(got.generated_ids, want.ids) << what << " (" << got.finish_reason << " " << got.error << ")";
  ASSERT_EQ(got.logprobs.size(), want.logprobs.size()) << what;
  for (size_t i = 0; i < want.logprobs.size(); ++i)
    EXPECT_NEAR(got.logprobs[i], want.logprobs[i], kPickLogprobTol) << what << " token " << i;
  for (size_t i = 0; i < want.top.size() && i < got.top_logprobs.size(); ++i) {
    ASSERT_EQ(got.top_logprobs[i].size(), want.top[i].size()) << what << " token " << i;
    for (size_t k = 0; k < want.top[i].size(); ++k) {
      EXPECT_EQ(got.top_logprobs[i][k].id, want.top[i][k].id) << what << " token " << i << " alternative " << k;
      EXPECT_NEAR(got.top_logprobs[i][k].logprob, want.top[i][k].logprob, kPickLogprobTol) << what;
    }
  }
}

// A mix of what clients ask for: greedy and seeded sampling with every filter the sample op
// has, prompts of 1 to 40 tokens, 1 to 24 new tokens.
std::vector<GenerationRequest> device_requests(const Fixture& fx, size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(fx.vocab) - 1);
  std::uniform_int_distribution<int64_t> len(1, 40), new_tokens(1, 24);
  std::vector<GenerationRequest> out;
  for (size_t i = 0; i < n; ++i) {
    GenerationRequest r;
    if (i < fx.cases.size()) {
      r.prompt_ids = fx.cases[i].prompt;
    } else {
      r.prompt_ids.resize(static_cast<size_t>(len(rng)));
      for (auto& t : r.prompt_ids) t = id(rng);
    }
    r.max_new_tokens = new_tokens(rng);
    SamplingParams& p = r.sampling;
    p.seed = 1000 + i;
    p.temperature = i % 4 == 0 ? 0.0 : i % 4 == 1 ? 1.3 : i % 4 == 2 ? 0.8 : 1.0;
    if (i % 4 == 2) p.top_k = 40, p.top_p = 0.9;
    if (i % 4 == 3) p.min_p = 0.02, p.top_p = 0.97;
    out.push_back(std::move(r));
  }
  return out;
}

// Waits until `h` has streamed `n` pieces (or finished), keeping them.
void await_pieces(RequestHandle& h, size_t n, std::vector<StreamPiece>& kept) {
  while (kept.size() < n) {
    auto p = h.next_piece();
    if (!p) return;
    kept.push_back(std::move(*p));
  }
}

} // namespace

// 1 to 8 slots, eight requests each: they queue, join as slots free, leave at their own
// lengths, and the later ones are submitted while the first are decoding. Every one equals
// its run alone, on the dense and on the hybrid (Gated DeltaNet) fixture, whose slots are
// reused while steps queued for their last occupant still run.
TEST(EngineLoop, ConcurrentRequestsJoiningAndLeavingEqualEachAlone) {
  for (const char* name : {"tiny-qwen3", "tiny-qwen3_5"}) {
    const Fixture fx = Fixture::load(name);
    Backend be = cpu_model_backend();
    auto ref = model(be, fx, 1);
    auto rng = fresh_rng("engine loop requests");
    const std::vector<GenerationRequest> reqs = device_requests(fx, 8, rng);
    std::vector<Reference> want;
    for (const auto& r : reqs) want.push_back(alone(*ref, r));
    for (int32_t slots : {1, 2, 3, 5, 8}) {
      auto lm = model(be, fx, slots);
      Engine engine(*lm, nullptr, {16});
      std::vector<std::shared_ptr<RequestHandle>> handles;
      std::vector<StreamPiece> first_pieces;
      for (size_t i = 0; i < reqs.size(); ++i) {
        handles.push_back(engine.submit(reqs[i]));
        // Every third request waits until the first has streamed some tokens: it joins a batch
        // already decoding (or queues behind it).
        if (i % 3 == 2) await_pieces(*handles[0], std::min<size_t>(first_pieces.size() + 2, want[0].ids.size()),
                                     first_pieces);
      }
      for (size_t i = 0; i < reqs.size(); ++i) {
        const ServeResult r = handles[i]->wait();
        EXPECT_EQ(r.finish_reason, "length") << r.error;
        expect_same(r, want[i], fmt::format("{}, {} slots, request {}", name, slots, i));
      }
      EXPECT_EQ(engine.stats().logits_rows, 0) << "every request here is picked on the backend";
      EXPECT_GT(engine.stats().chained_rows, 0);
    }
  }
}

// Requests the sample op cannot serve (penalties, top logprobs) bring their logits rows back
// and are sampled on the host, in the same batches as rows picked on the backend: all equal
// their runs alone, and the loop brought back exactly one logits row per token of those
// requests (their first token's included), none for the others.
TEST(EngineLoop, HostSampledRequestsMixedIntoADeviceBatchEqualAloneAndOnlyTheirRowsComeBack) {
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  Backend be = cpu_model_backend();
  auto ref = model(be, fx, 1);
  auto rng = fresh_rng("engine loop host rows");
  std::vector<GenerationRequest> reqs = device_requests(fx, 7, rng);
  std::vector<bool> host(reqs.size(), false);
  for (size_t i : {1u, 4u, 6u}) host[i] = true;
  reqs[1].sampling.repetition_penalty = 1.3;
  reqs[4].sampling.presence_penalty = 0.7, reqs[4].sampling.frequency_penalty = 0.4;
  reqs[6].sampling.top_logprobs = 3;
  for (auto& r : reqs) r.max_new_tokens = std::max<int64_t>(r.max_new_tokens, 6);
  std::vector<Reference> want;
  for (const auto& r : reqs) want.push_back(alone(*ref, r));
  auto lm = model(be, fx, 4);
  Engine engine(*lm, nullptr, {16});
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (const auto& r : reqs) handles.push_back(engine.submit(r));
  int64_t host_tokens = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const ServeResult r = handles[i]->wait();
    expect_same(r, want[i], fmt::format("request {}{}", i, host[i] ? " (host-sampled)" : ""));
    if (host[i]) host_tokens += static_cast<int64_t>(r.generated_ids.size());
  }
  EXPECT_EQ(engine.stats().logits_rows, host_tokens);
  EXPECT_GT(host_tokens, 0);
}

// A stream cancelled after a few tokens ends "cancelled" with a prefix of its tokens alone;
// the request beside it is not disturbed, and the next request in the freed slot (queued
// behind the cancelled one, on the hybrid model whose slot state the in-flight step still
// touches) equals its run alone.
TEST(EngineLoop, CancellationMidStreamLeavesTheOthersAndTheSlotIntact) {
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  Backend be = cpu_model_backend();
  auto ref = model(be, fx, 1);
  auto rng = fresh_rng("engine loop cancel");
  std::vector<GenerationRequest> reqs = device_requests(fx, 3, rng);
  reqs[0].max_new_tokens = 200; // long enough to be cancelled mid-stream
  reqs[1].max_new_tokens = 30;
  std::vector<Reference> want;
  for (const auto& r : reqs) want.push_back(alone(*ref, r));
  auto lm = model(be, fx, 2);
  Engine engine(*lm, nullptr, {16});
  auto a = engine.submit(reqs[0]);
  auto b = engine.submit(reqs[1]);
  auto c = engine.submit(reqs[2]); // waits for a slot
  std::vector<StreamPiece> seen;
  await_pieces(*a, 5, seen);
  engine.cancel(*a);
  const ServeResult ra = a->wait();
  EXPECT_EQ(ra.finish_reason, "cancelled");
  ASSERT_GE(ra.generated_ids.size(), 5u);
  ASSERT_LT(ra.generated_ids.size(), want[0].ids.size());
  EXPECT_TRUE(std::equal(ra.generated_ids.begin(), ra.generated_ids.end(), want[0].ids.begin()))
      << "a cancelled stream's tokens are a prefix of its tokens alone";
  expect_same(b->wait(), want[1], "the request beside the cancelled one");
  expect_same(c->wait(), want[2], "the request in the freed slot");
}

// While a 220-token prompt is read in chunks of 7, a stream that is decoding beside it gets a
// token in (nearly) every iteration: at least one per chunk but two, counted from the long
// request's submission to its first token. Both equal their runs alone.
TEST(EngineLoop, ALongChunkedPromptBesideDecodingStreamsDoesNotStallThem) {
  const Fixture fx = Fixture::load("tiny-qwen3");
  Backend be = cpu_model_backend();
  auto ref = model(be, fx, 1);
  auto rng = fresh_rng("engine loop long prompt");
  std::vector<GenerationRequest> reqs = device_requests(fx, 2, rng);
  reqs[0].max_new_tokens = 200;
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(fx.vocab) - 1);
  reqs[1].prompt_ids.resize(220);
  for (auto& t : reqs[1].prompt_ids) t = id(rng);
  reqs[1].max_new_tokens = 4;
  const int64_t chunks = (220 + kChunk - 1) / kChunk;
  std::vector<Reference> want;
  for (const auto& r : reqs) want.push_back(alone(*ref, r));
  auto lm = model(be, fx, 2);
  Engine engine(*lm, nullptr, {16});
  auto a = engine.submit(reqs[0]);
  std::vector<StreamPiece> seen;
  await_pieces(*a, 3, seen);
  // The stream's pieces, counted on the loop's thread as they are pushed (set_notify's call at
  // once, on this thread, is not a piece), and their count when the long request's first token
  // arrives (its handle's first change).
  const auto here = std::this_thread::get_id();
  auto pieces = std::make_shared<std::atomic<int64_t>>(0);
  auto at_first_token = std::make_shared<std::atomic<int64_t>>(-1);
  a->set_notify([pieces, here] {
    if (std::this_thread::get_id() != here) ++*pieces;
  });
  const int64_t at_submit = pieces->load();
  auto b = engine.submit(reqs[1]);
  b->set_notify([pieces, at_first_token, here] {
    int64_t unset = -1;
    if (std::this_thread::get_id() != here) at_first_token->compare_exchange_strong(unset, pieces->load());
  });
  expect_same(b->wait(), want[1], "the long prompt");
  const ServeResult ra = a->wait();
  expect_same(ra, want[0], "the stream beside it");
  ASSERT_GE(at_first_token->load(), 0);
  EXPECT_GE(*at_first_token - at_submit, chunks - 2)
      << "the stream got " << *at_first_token - at_submit << " tokens while " << chunks << " chunks were read";
  EXPECT_GE(engine.stats().prompt_chunks, chunks);
}
