// Admission by KV blocks (docs/memory.md, "The KV block pool"): with a pool smaller than
// slots x max_context, the engine admits a request only when the blocks of every position it may
// reach are free, so requests wait for each other instead of failing mid-stream, and a waiting
// request never changes what another generates. Each request is compared with itself run alone
// on a one-slot model whose pool holds its whole context.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "../models/model_test_env.hpp"
#include "ninfer/serving/engine.hpp"

using namespace ninfer;
using namespace ninfer::serving;
using namespace ninfer::test;

namespace {

constexpr int64_t kContext = 256;
// ServeTimings' unix times come from one steady clock converted per reading: a request admitted
// after another ended may read up to this much before that end.
constexpr double kClockSlackS = 5e-3;

std::unique_ptr<CausalLM> pooled_model(Backend& be, const Fixture& fx, int32_t slots, int64_t kv_capacity) {
  ModelOptions o;
  o.max_context = kContext;
  o.max_sequences = slots;
  o.prefill_chunk = 16;
  o.kv_capacity = kv_capacity;
  return CausalLM::load(fx.checkpoint, be, o);
}

// Prompts of 20 to 60 tokens and 60 to 120 new tokens: two to three 64-position blocks each.
std::vector<GenerationRequest> requests(const Fixture& fx, size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(fx.vocab) - 1);
  std::uniform_int_distribution<int64_t> len(20, 60), new_tokens(60, 120);
  std::vector<GenerationRequest> out(n);
  for (size_t i = 0; i < n; ++i) {
    GenerationRequest& r = out[i];
    r.prompt_ids.resize(static_cast<size_t>(len(rng)));
    for (auto& t : r.prompt_ids) t = id(rng);
    r.max_new_tokens = new_tokens(rng);
    r.sampling.seed = 77 + i;
    r.sampling.temperature = i % 2 ? 0.9 : 0.0;
  }
  return out;
}

std::vector<ServeResult> run_all(Engine& engine, const std::vector<GenerationRequest>& reqs) {
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (const auto& r : reqs) handles.push_back(engine.submit(r));
  std::vector<ServeResult> out;
  for (auto& h : handles) out.push_back(h->wait());
  return out;
}

double ended_at(const ServeResult& r) { return r.timings.first_token_at + r.timings.decode_s; }

} // namespace

// Six requests on four slots over a pool of 6 blocks (384 positions): at most two fit at once,
// so the others wait for blocks while slots are free. Each equals its run alone, on the dense and
// on the hybrid fixture; the pool is whole again afterwards.
TEST(KvAdmission, RequestsWaitForBlocksAndEachEqualsItsRunAlone) {
  for (const char* name : {"tiny-qwen3", "tiny-qwen3_5"}) {
    const Fixture fx = Fixture::load(name);
    auto rng = fresh_rng("kv admission requests");
    const std::vector<GenerationRequest> reqs = requests(fx, 6, rng);

    Backend ref_be = cpu_model_backend();
    auto ref_lm = pooled_model(ref_be, fx, 1, 0);
    Engine ref(*ref_lm, nullptr, {16});
    std::vector<ServeResult> want;
    for (const auto& r : reqs) want.push_back(ref.submit(r)->wait());

    Backend be = cpu_model_backend();
    auto lm = pooled_model(be, fx, 4, 6 * 64);
    ASSERT_EQ(lm->kv_blocks_total(), 6);
    Engine engine(*lm, nullptr, {16});
    const std::vector<ServeResult> got = run_all(engine, reqs);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(got[i].finish_reason, "length") << got[i].error;
      EXPECT_EQ(got[i].generated_ids, want[i].generated_ids) << name << " request " << i;
    }
    // No moment held more blocks than the pool: two requests overlapped only if their blocks fit.
    for (size_t i = 0; i < reqs.size(); ++i)
      for (size_t j = 0; j < reqs.size(); ++j) {
        if (i == j || got[j].timings.admitted_at < got[i].timings.admitted_at) continue;
        if (got[j].timings.admitted_at + kClockSlackS >= ended_at(got[i])) continue; // i had ended
        const auto blocks = [&](const GenerationRequest& r) {
          return lm->kv_blocks_for(static_cast<int64_t>(r.prompt_ids.size()) + r.max_new_tokens);
        };
        EXPECT_LE(blocks(reqs[i]) + blocks(reqs[j]), 6) << name << ": requests " << i << " and " << j << " overlapped";
      }
    EXPECT_EQ(engine.load().pending, 0);
  }
}

// A request whose blocks are taken waits even with slots free, and is admitted only after the one
// holding them ends; with a pool of every slot's context the same two run together (the check
// can tell the two apart).
TEST(KvAdmission, ARequestWaitsForTheBlocksOfARunningOne) {
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  GenerationRequest a, b;
  a.prompt_ids.assign(40, 5);
  b.prompt_ids.assign(30, 9);
  a.max_new_tokens = b.max_new_tokens = 150; // 190 and 180 positions: 3 blocks each
  a.sampling.temperature = b.sampling.temperature = 0;
  for (const int64_t capacity : {int64_t{256}, int64_t{0}}) {
    Backend be = cpu_model_backend();
    auto lm = pooled_model(be, fx, 2, capacity);
    Engine engine(*lm, nullptr, {16});
    const std::vector<ServeResult> r = run_all(engine, {a, b});
    ASSERT_EQ(r[0].finish_reason, "length") << r[0].error;
    ASSERT_EQ(r[1].finish_reason, "length") << r[1].error;
    if (capacity) {
      EXPECT_GE(r[1].timings.admitted_at + kClockSlackS, ended_at(r[0])) << "b ran beside a with 4 blocks for 6";
    } else {
      EXPECT_LT(r[1].timings.admitted_at, r[0].timings.first_token_at + r[0].timings.decode_s / 2)
          << "with a block for every slot's context b joins at once";
    }
  }
}

// A retired request's slot keeps its rows for prompt reuse; a request that needs those blocks
// takes them back (the other slot is the one never used, so the reuse must be forgotten), and the
// next turn of the first conversation is then read whole, with the same reply as on a fresh
// engine.
TEST(KvAdmission, RetiredSlotsGiveTheirKeptRowsBack) {
  const Fixture fx = Fixture::load("tiny-qwen3");
  auto rng = fresh_rng("kv admission reclaim");
  GenerationRequest first = requests(fx, 1, rng)[0];
  first.max_new_tokens = 20;
  first.sampling.temperature = 0;
  GenerationRequest big; // sharing no first token with `first`: no slot reuses anything for it
  big.prompt_ids.assign(100, (first.prompt_ids[0] + 1) % static_cast<int32_t>(fx.vocab));
  big.max_new_tokens = 150; // 250 positions: the pool's 4 blocks
  big.sampling.temperature = 0;

  Backend be = cpu_model_backend();
  auto lm = pooled_model(be, fx, 2, 256);
  Engine engine(*lm, nullptr, {16});
  const ServeResult r1 = engine.submit(first)->wait();
  ASSERT_EQ(r1.finish_reason, "length") << r1.error;
  EXPECT_LT(engine.load().kv_blocks_free, 4) << "the retired slot keeps its rows";
  const ServeResult r2 = engine.submit(big)->wait();
  ASSERT_EQ(r2.finish_reason, "length") << r2.error;

  GenerationRequest next = first;
  next.prompt_ids.insert(next.prompt_ids.end(), r1.generated_ids.begin(), r1.generated_ids.end());
  next.prompt_ids.push_back(11);
  const ServeResult r3 = engine.submit(next)->wait();
  ASSERT_EQ(r3.finish_reason, "length") << r3.error;
  EXPECT_EQ(r3.cached_tokens, 0) << "its slot's rows were given to the big request";

  Backend fresh_be = cpu_model_backend();
  auto fresh_lm = pooled_model(fresh_be, fx, 1, 0);
  Engine fresh(*fresh_lm, nullptr, {16});
  EXPECT_EQ(fresh.submit(big)->wait().generated_ids, r2.generated_ids);
  EXPECT_EQ(fresh.submit(next)->wait().generated_ids, r3.generated_ids);
}

// With speculation a request also reserves one round's drafts + 1 positions: its last rounds
// write drafts past its last token. Four requests of exactly two blocks (prompt + max_tokens =
// 128, prompts of 21 to 24 tokens so that rounds of four positions do not end on the block
// boundary) on a pool of eight: reserving only their tokens would admit all four and leave last
// rounds that cross into a third block without one (the loop then fails); with the round
// reserved two run at a time. On the demo model (its MTP head), K = 3, each equals its run
// alone.
TEST(KvAdmission, SpeculatingRequestsReserveTheirLastRound) {
  const Fixture demo = Fixture::load("models/qwen3_5-demo");
  std::vector<GenerationRequest> reqs(4);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].prompt_ids = demo.cases[i % demo.cases.size()].prompt;
    reqs[i].prompt_ids.resize(21 + i, 7);
    reqs[i].max_new_tokens = 128 - static_cast<int64_t>(reqs[i].prompt_ids.size());
    reqs[i].sampling.temperature = 0;
  }
  auto load = [&](Backend& be, int32_t slots, int64_t capacity) {
    ModelOptions o;
    o.max_context = kContext;
    o.max_sequences = slots;
    o.prefill_chunk = 16;
    o.kv_capacity = capacity;
    o.speculation = {SpecMethod::Mtp, 3};
    return CausalLM::load(demo.checkpoint, be, o);
  };
  Backend ref_be = cpu_model_backend();
  auto ref_lm = load(ref_be, 1, 0);
  Engine ref(*ref_lm, nullptr, {16});
  Backend be = cpu_model_backend();
  auto lm = load(be, 4, 2 * kContext);
  ASSERT_EQ(lm->kv_blocks_total(), 8);
  Engine engine(*lm, nullptr, {16});
  const std::vector<ServeResult> got = run_all(engine, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(got[i].finish_reason, "length") << got[i].error;
    EXPECT_EQ(got[i].generated_ids, ref.submit(reqs[i])->wait().generated_ids) << "request " << i;
  }
}
