// CausalLM::fork on the CPU plugin: a slot forked from another after a prompt decodes exactly as
// a slot that read the prompt itself. Each case runs the same calls on two models, one that
// forked and one whose slots read the prompt independently, and compares every logits row, pick
// and log-probability bit for bit: a dense model (Qwen3), a hybrid one (Qwen3.5), the int8 KV
// cache (its scales travel with the rows) and a speculating model (the MTP head's per-slot state
// and its KV row of the last prompt position); prompts that end inside a block and on a block
// boundary, over blocks of 32 positions so a prompt spans several. Steps of the two slots are
// interleaved (alone, together, a prompt chunk beside a decode row) and then each slot is
// compared with a solo run: what one slot writes never reaches the other. Copy-on-write after
// truncate and restore_snapshot back into a shared block, the block accounting, and the
// refusals are checked too. Prompts and fed tokens are drawn fresh every run.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstring>
#include <map>
#include <random>

#include "model_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

constexpr const char* kDemo = "models/qwen3_5-demo";
constexpr int32_t kBlock = 32;
constexpr int64_t kContext = 256;

struct ModelCase {
  const char* name;
  const char* checkpoint; // a fixture, or a path from the repository root
  KvCachePrecision kv = KvCachePrecision::F32;
};

void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.name; }

Checkpoint open_checkpoint(const char* name) {
  const std::string n(name);
  return Checkpoint::open(n.find('/') == std::string::npos ? fixtures_dir() / n : source_dir() / n);
}

struct LoadOptions {
  KvCachePrecision kv = KvCachePrecision::F32;
  int32_t drafts = 0;
  int32_t slots = 3;
  int64_t kv_capacity = 0;
  bool snapshots = false;
};

std::unique_ptr<CausalLM> load(const Checkpoint& ck, Backend& be, const LoadOptions& l) {
  ModelOptions o;
  o.max_context = kContext;
  o.max_sequences = l.slots;
  o.prefill_chunk = 40; // a prompt is read in several chunks
  o.mixed_chunk = 8;
  o.kv_block_tokens = kBlock;
  o.kv_cache = l.kv;
  o.kv_capacity = l.kv_capacity;
  o.state_snapshots = l.snapshots;
  if (l.drafts) o.speculation = {SpecMethod::Mtp, l.drafts};
  return CausalLM::load(ck, be, o);
}

std::vector<int32_t> random_ids(std::mt19937_64& rng, size_t n, int64_t vocab) {
  std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = d(rng);
  return v;
}

// n tokens the model writes itself, greedily, after 4 random ones: the MTP head drafts what the
// model continues with, so its drafts are accepted (after random ids about one run in twelve
// accepted none, which left the head's state untested).
std::vector<int32_t> own_text(const Checkpoint& ck, std::mt19937_64& rng, size_t n) {
  Backend be = cpu_model_backend();
  auto lm = load(ck, be, {});
  std::vector<int32_t> ids = random_ids(rng, 4, ck.config().vocab_size);
  std::vector<float> logits = lm->prefill(0, ids);
  while (ids.size() < n) {
    const int32_t next = argmax(logits);
    ids.push_back(next);
    logits = lm->prefill(0, std::span(&next, 1));
  }
  return ids;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

// One step of the schedule: per row, its slot and the tokens it feeds (several: a prompt chunk,
// which leads its step).
using Step = std::vector<std::pair<int32_t, std::vector<int32_t>>>;

// Twelve steps over slots 0 and 1, alone and together, and one mixed step (a 5-token chunk of
// slot 1 beside a decode row of slot 0); the tokens are drawn fresh.
std::vector<Step> interleaved_steps(std::mt19937_64& rng, int64_t vocab) {
  std::vector<Step> steps;
  for (int k = 0; k < 12; ++k) {
    const int mask = k == 0 ? 1 : k == 1 ? 2 : static_cast<int>(rng() % 3) + 1;
    Step s;
    if (k == 6) {
      s.emplace_back(1, random_ids(rng, 5, vocab));
      s.emplace_back(0, random_ids(rng, 1, vocab));
    } else {
      for (int32_t slot : {0, 1})
        if (mask & (1 << slot)) s.emplace_back(slot, random_ids(rng, 1, vocab));
    }
    steps.push_back(std::move(s));
  }
  return steps;
}

// What one row of a step gave: the logits of its last token and its greedy pick.
struct RowOut {
  std::vector<float> logits;
  int32_t id = -1;
  float logprob = 0;
  bool operator==(const RowOut& o) const {
    return same_bits(logits, o.logits) && id == o.id && std::memcmp(&logprob, &o.logprob, sizeof(float)) == 0;
  }
};

// Runs the steps; per slot, its rows' outputs in order.
std::map<int32_t, std::vector<RowOut>> run(CausalLM& lm, const std::vector<Step>& steps) {
  std::map<int32_t, std::vector<RowOut>> out;
  const auto V = static_cast<size_t>(lm.vocab_size());
  for (const Step& s : steps) {
    std::vector<StepRow> rows;
    for (const auto& [slot, ids] : s) rows.push_back({.slot = slot, .ids = ids, .logits = true});
    lm.queue_step(rows);
    const StepResult r = lm.next_result();
    for (size_t i = 0; i < rows.size(); ++i)
      out[rows[i].slot].push_back({std::vector<float>(r.logits.begin() + static_cast<ptrdiff_t>(i * V),
                                                      r.logits.begin() + static_cast<ptrdiff_t>((i + 1) * V)),
                                   r.ids[i], r.logprobs[i]});
  }
  return out;
}

// Slot `slot`'s rows of the steps alone, in a fresh model that read `prompt` itself.
std::vector<RowOut> solo(const Checkpoint& ck, const LoadOptions& l, const std::vector<int32_t>& prompt,
                         const std::vector<Step>& steps, int32_t slot) {
  Backend be = cpu_model_backend();
  auto lm = load(ck, be, l);
  lm->prefill(0, prompt);
  std::vector<Step> alone;
  for (const Step& s : steps)
    for (const auto& [sl, ids] : s)
      if (sl == slot) alone.push_back({{0, ids}});
  return run(*lm, alone)[0];
}

class ForkCase : public testing::TestWithParam<ModelCase> {};

} // namespace

// Prompts of 75 positions (the last block partly written: both slots' next rows land in it)
// and 64 (on a boundary: the next rows open a new block).
TEST_P(ForkCase, ForkedSlotDecodesAsIfItHadReadThePrompt) {
  const ModelCase& m = GetParam();
  const Checkpoint ck = open_checkpoint(m.checkpoint);
  const int64_t vocab = ck.config().vocab_size;
  auto rng = fresh_rng(m.name);
  const LoadOptions l{.kv = m.kv};
  for (const size_t prompt_len : {size_t{75}, size_t{64}}) {
    SCOPED_TRACE(fmt::format("{}, a prompt of {} positions", m.name, prompt_len));
    const std::vector<int32_t> prompt = random_ids(rng, prompt_len, vocab);
    const std::vector<Step> steps = interleaved_steps(rng, vocab);

    Backend fork_be = cpu_model_backend(), ref_be = cpu_model_backend();
    auto forked = load(ck, fork_be, l), ref = load(ck, ref_be, l);
    const std::vector<float> last = forked->prefill(0, prompt);
    const int64_t free_before = forked->kv_blocks_free();
    forked->fork(0, 1);
    EXPECT_EQ(forked->position(1), static_cast<int64_t>(prompt_len));
    const int64_t blocks = forked->kv_blocks_for(static_cast<int64_t>(prompt_len));
    const int64_t partial = prompt_len % kBlock ? 1 : 0;
    EXPECT_EQ(forked->kv_blocks_held(1), blocks);
    EXPECT_EQ(forked->kv_blocks_shared(1), blocks - partial) << "the block both write next is copied";
    EXPECT_EQ(forked->kv_blocks_shared(0), blocks - partial);
    EXPECT_EQ(free_before - forked->kv_blocks_free(), partial);
    EXPECT_TRUE(same_bits(ref->prefill(0, prompt), last));
    ref->prefill(1, prompt);

    const auto got = run(*forked, steps), want = run(*ref, steps);
    for (int32_t slot : {0, 1}) {
      ASSERT_EQ(got.at(slot).size(), want.at(slot).size());
      for (size_t k = 0; k < got.at(slot).size(); ++k)
        EXPECT_TRUE(got.at(slot)[k] == want.at(slot)[k]) << "slot " << slot << " row " << k;
      const std::vector<RowOut> alone = solo(ck, l, prompt, steps, slot);
      ASSERT_EQ(alone.size(), got.at(slot).size());
      for (size_t k = 0; k < alone.size(); ++k)
        EXPECT_TRUE(got.at(slot)[k] == alone[k]) << "slot " << slot << " row " << k << " against the slot alone";
    }
    // Releasing one holder keeps the blocks the other still reads; the last frees them.
    forked->release_kv(0);
    EXPECT_EQ(forked->kv_blocks_shared(1), 0);
    forked->release_kv(1);
    EXPECT_EQ(forked->kv_blocks_free(), forked->kv_blocks_total());
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ForkCase,
                         testing::Values(ModelCase{"qwen3_dense", "tiny-qwen3"},
                                         ModelCase{"qwen3_5_hybrid", "tiny-qwen3_5"},
                                         ModelCase{"demo_int8_kv", kDemo, KvCachePrecision::Int8}),
                         [](const testing::TestParamInfo<ModelCase>& i) { return std::string(i.param.name); });

// A speculating model: the fork copies the slot's last hidden state and the MTP head's KV rows
// (the head writes its row of the last prompt position with the next token, so the block that
// holds it is copied even when the prompt ends on a boundary). Rounds of each slot alone, then
// together, give the bits of two slots that read the prompt; so do the model's and the head's
// logits of one more token afterwards, which read every row of both caches.
TEST(Fork, SpeculatingModelForksTheHeadsStateToo) {
  const Checkpoint ck = open_checkpoint(kDemo);
  auto rng = fresh_rng("Fork of a speculating model");
  const LoadOptions l{.drafts = 3};
  for (const size_t prompt_len : {size_t{75}, size_t{64}}) {
    SCOPED_TRACE(fmt::format("a prompt of {} positions", prompt_len));
    const std::vector<int32_t> prompt = own_text(ck, rng, prompt_len);
    Backend fork_be = cpu_model_backend(), ref_be = cpu_model_backend();
    auto forked = load(ck, fork_be, l), ref = load(ck, ref_be, l);
    const int32_t first = argmax(forked->prefill(0, prompt));
    forked->fork(0, 1);
    EXPECT_EQ(forked->kv_blocks_shared(1), (static_cast<int64_t>(prompt_len) - 1) / kBlock)
        << "the blocks of the last prompt position and after are copied";
    ref->prefill(0, prompt);
    ref->prefill(1, prompt);
    const int32_t other = (first + 1) % static_cast<int32_t>(ck.config().vocab_size);
    // Each slot's first round alone (slot 1 from another token), then rounds of both.
    const std::vector<std::vector<SpecRow>> rounds{{{.slot = 0, .id = first}},
                                                   {{.slot = 1, .id = other}},
                                                   {{.slot = 1}, {.slot = 0}},
                                                   {{.slot = 0}, {.slot = 1}},
                                                   {{.slot = 0}},
                                                   {{.slot = 0}, {.slot = 1}}};
    int64_t accepted = 0;
    for (size_t k = 0; k < rounds.size(); ++k) {
      forked->queue_spec_round(rounds[k]);
      ref->queue_spec_round(rounds[k]);
      const StepResult a = forked->next_result(), b = ref->next_result();
      EXPECT_EQ(a.ids, b.ids) << "round " << k;
      EXPECT_TRUE(same_bits(a.logprobs, b.logprobs)) << "round " << k;
      EXPECT_EQ(a.accepted, b.accepted) << "round " << k;
      for (int32_t n : a.accepted) accepted += n;
    }
    EXPECT_GT(accepted, 0) << "no draft accepted: the head's state went untested";
    for (int32_t slot : {0, 1}) {
      ASSERT_EQ(forked->position(slot), ref->position(slot));
      const int32_t next = 7;
      EXPECT_TRUE(same_bits(forked->prefill(slot, std::span(&next, 1)), ref->prefill(slot, std::span(&next, 1))))
          << "slot " << slot << ": the model's logits";
      EXPECT_TRUE(same_bits(forked->last_step_draft_logits(0, 1), ref->last_step_draft_logits(0, 1)))
          << "slot " << slot << ": the head's logits";
    }
  }
}

// A forked slot rolled back into a block it shares (truncate on a dense model; restore_snapshot
// on a hybrid one, the snapshot forked with the state) copies that block before writing: its
// new prompt gives the logits of a slot that read the same tokens, and the other holder still
// decodes as if nothing happened.
TEST(Fork, WritesBackInsideASharedBlockCopyItFirst) {
  auto rng = fresh_rng("Fork and copy-on-write");
  for (const bool hybrid : {false, true}) {
    SCOPED_TRACE(hybrid ? "tiny-qwen3_5, restore_snapshot" : "tiny-qwen3, truncate");
    const Checkpoint ck = open_checkpoint(hybrid ? "tiny-qwen3_5" : "tiny-qwen3");
    const int64_t vocab = ck.config().vocab_size;
    const LoadOptions l{.snapshots = hybrid};
    const std::vector<int32_t> prompt = random_ids(rng, 96, vocab), tail = random_ids(rng, 30, vocab);
    const int32_t next = random_ids(rng, 1, vocab)[0];
    constexpr int64_t kBack = 40; // inside the second block
    Backend be = cpu_model_backend(), ref_be = cpu_model_backend();
    auto lm = load(ck, be, l), ref = load(ck, ref_be, l);
    lm->prefill(0, std::span(prompt).first(static_cast<size_t>(kBack)));
    if (hybrid) lm->save_snapshot(0);
    lm->prefill(0, std::span(prompt).subspan(static_cast<size_t>(kBack)));
    lm->fork(0, 1);
    EXPECT_EQ(lm->kv_blocks_shared(1), 3);
    if (hybrid) {
      EXPECT_EQ(lm->snapshot_position(1), kBack);
      lm->restore_snapshot(1);
    } else {
      lm->truncate(1, kBack);
    }
    const int64_t free_before = lm->kv_blocks_free();
    const std::vector<float> got = lm->prefill(1, tail, LogitsFor::All);
    EXPECT_EQ(free_before - lm->kv_blocks_free(), 2) << "copies of the second and third blocks, both written";
    EXPECT_EQ(lm->kv_blocks_shared(1), 1);
    ref->prefill(0, std::span(prompt).first(static_cast<size_t>(kBack)));
    EXPECT_TRUE(same_bits(got, ref->prefill(0, tail, LogitsFor::All))) << "the rolled-back slot's new prompt";
    ref->prefill(1, prompt);
    EXPECT_TRUE(same_bits(decode_logits(*lm, std::vector<int32_t>{0}, std::vector<int32_t>{next}),
                          decode_logits(*ref, std::vector<int32_t>{1}, std::vector<int32_t>{next})))
        << "the slot it was forked from";
  }
}

// What fork refuses, each with a message saying why, leaving the model as it was; and a fork
// into a slot that holds blocks of its own (a reservation) uses them.
TEST(Fork, RefusesWhatItCannotCopyAndLeavesTheModelUnchanged) {
  const Checkpoint ck = open_checkpoint("tiny-qwen3");
  auto rng = fresh_rng("Fork refusals");
  const std::vector<int32_t> prompt = random_ids(rng, 75, ck.config().vocab_size);
  // A pool of one sequence's 8 blocks for the three slots.
  Backend be = cpu_model_backend();
  auto lm = load(ck, be, {.kv_capacity = kContext});
  ASSERT_EQ(lm->kv_blocks_total(), 8);
  lm->prefill(0, prompt);
  EXPECT_NE(error_of([&] { lm->fork(0, 0); }).find("into itself"), std::string::npos);
  EXPECT_NE(error_of([&] { lm->fork(0, 3); }).find("slot 3 does not exist"), std::string::npos);
  EXPECT_NE(error_of([&] { lm->fork(-1, 1); }).find("slot -1 does not exist"), std::string::npos);
  EXPECT_NE(error_of([&] { lm->fork(2, 1); }).find("holds no tokens"), std::string::npos);
  lm->prefill(2, random_ids(rng, 150, ck.config().vocab_size)); // 5 blocks: none is free
  ASSERT_EQ(lm->kv_blocks_free(), 0);
  const std::string out = error_of([&] { lm->fork(0, 1); });
  EXPECT_NE(out.find("out of blocks"), std::string::npos) << out;
  EXPECT_EQ(lm->position(1), 0);
  EXPECT_EQ(lm->kv_blocks_held(1), 0);
  EXPECT_EQ(lm->kv_blocks_free(), 0);
  // Into slot 2: its first three blocks give way to slot 0's, one of them holds the copy.
  lm->fork(0, 2);
  EXPECT_EQ(lm->position(2), 75);
  EXPECT_EQ(lm->kv_blocks_held(2), 5) << "its blocks past the position stay";
  EXPECT_EQ(lm->kv_blocks_shared(2), 2);
  EXPECT_EQ(lm->kv_blocks_free(), 2);

  Backend spec_be = cpu_model_backend();
  const Checkpoint demo = open_checkpoint(kDemo);
  auto spec = load(demo, spec_be, {.drafts = 2});
  const std::vector<int32_t> p = random_ids(rng, 20, demo.config().vocab_size);
  spec->prefill(0, p);
  spec->prefill(1, p);
  const SpecRow row{.slot = 0, .id = 5};
  spec->queue_spec_round(std::span(&row, 1));
  EXPECT_NE(error_of([&] { spec->fork(0, 2); }).find("round whose result is not read"), std::string::npos);
  EXPECT_NE(error_of([&] { spec->fork(1, 0); }).find("round whose result is not read"), std::string::npos);
  spec->next_result();
  spec->fork(0, 2);
  EXPECT_EQ(spec->position(2), spec->position(0));
}
