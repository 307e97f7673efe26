// The model API's contract beyond numerics: clear errors for bad input that leave the model
// usable, slots that are independent, reset that really forgets.
#include <gtest/gtest.h>

#include "model_test_env.hpp"
#include "ninfer/support/error.hpp"

using namespace ninfer;
using namespace ninfer::test;

TEST(CausalLmApi, BadInputIsAnErrorAndLeavesTheSlotUsable) {
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  Backend be = cpu_model_backend();
  auto lm = fixture_model(be, fx, 64, 2, 16);
  const std::vector<int32_t> too_long(65, 1);
  EXPECT_NE(error_of([&] { lm->prefill(0, too_long); }).find("max_context"), std::string::npos);
  EXPECT_EQ(lm->position(0), 0);
  EXPECT_NE(error_of([&] { lm->prefill(0, std::vector<int32_t>{1, 512}); }).find("vocabulary"), std::string::npos);
  EXPECT_NE(error_of([&] { lm->prefill(0, std::vector<int32_t>{-1}); }).find("vocabulary"), std::string::npos);
  EXPECT_NE(error_of([&] { lm->prefill(0, std::vector<int32_t>{}); }).find("empty"), std::string::npos);
  EXPECT_NE(error_of([&] { lm->prefill(2, std::vector<int32_t>{1}); }).find("slot 2"), std::string::npos);
  EXPECT_NE(error_of([&] { decode_logits(*lm, std::vector<int32_t>{1, 1}, std::vector<int32_t>{3, 4}); }).find("twice"),
            std::string::npos);
  const std::vector<int32_t> two = {3, 4}, one = {5};
  const std::vector<StepRow> row_and_chunk = {{.slot = 1, .ids = one}, {.slot = 0, .ids = two}};
  EXPECT_NE(error_of([&] { lm->queue_step(row_and_chunk); }).find("first row"), std::string::npos)
      << "a step is decode rows, one prompt chunk, or a prompt chunk and then decode rows";
  EXPECT_EQ(lm->position(0), 0);
  // After all of that, the model still matches the reference.
  const auto& c = fx.cases[1];
  const auto logits = lm->prefill(0, c.prompt, LogitsFor::All);
  EXPECT_LE(max_abs_diff(logits, c.prompt_logits), kFixtureLogitsF32);
}

TEST(CausalLmApi, AFullSequenceRefusesAnotherToken) {
  const Fixture fx = Fixture::load("tiny-qwen3");
  Backend be = cpu_model_backend();
  auto lm = fixture_model(be, fx, 8, 2, 16);
  lm->prefill(1, std::vector<int32_t>(8, 5));
  EXPECT_EQ(lm->position(1), 8);
  EXPECT_NE(error_of([&] { decode_logits(*lm, std::vector<int32_t>{1}, std::vector<int32_t>{5}); }).find("full"),
            std::string::npos);
}

// reset() must clear the GDN conv and recurrent state: a reused slot gives the reference
// logits again, and a busy neighbouring slot does not leak into it.
TEST(CausalLmApi, ResetForgetsAndSlotsAreIndependent) {
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  Backend be = cpu_model_backend();
  auto lm = fixture_model(be, fx, 64, 2, 16);
  const auto& c = fx.cases[1];
  lm->prefill(0, fx.cases[0].prompt);
  lm->prefill(1, std::vector<int32_t>{7, 8, 9, 10, 11});
  lm->reset(0);
  EXPECT_EQ(lm->position(0), 0);
  const auto logits = lm->prefill(0, c.prompt, LogitsFor::All);
  EXPECT_LE(max_abs_diff(logits, c.prompt_logits), kFixtureLogitsF32);
  EXPECT_EQ(lm->position(1), 5);
}

// A state snapshot returns a hybrid model's slot to the end of a prompt after more tokens were
// fed: the rest of the prompt then gives transformers' logits, as if the detour never happened.
// It costs one more copy of the Gated DeltaNet state per slot, and its errors are clear.
TEST(CausalLmApi, StateSnapshotReturnsTheSlotToWhereItWasSaved) {
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  const auto& c = fx.cases[2];
  const size_t k = c.prompt.size() / 2;
  ModelOptions o;
  o.max_context = 256;
  o.max_sequences = 2;
  o.prefill_chunk = 16;
  Backend plain_be = cpu_model_backend();
  auto plain = CausalLM::load(fx.checkpoint, plain_be, o);
  EXPECT_NE(error_of([&] { plain->save_snapshot(0); }).find("state_snapshots"), std::string::npos);
  o.state_snapshots = true;
  Backend be = cpu_model_backend();
  auto lm = CausalLM::load(fx.checkpoint, be, o);
  const auto state = [](const Backend& b) { return b.memory().in_use[static_cast<size_t>(MemoryUse::State)]; };
  EXPECT_EQ(state(be), 2 * state(plain_be));

  EXPECT_NE(error_of([&] { lm->restore_snapshot(0); }).find("no snapshot"), std::string::npos);
  const std::vector<int32_t> head(c.prompt.begin(), c.prompt.begin() + static_cast<ptrdiff_t>(k));
  const std::vector<int32_t> tail(c.prompt.begin() + static_cast<ptrdiff_t>(k), c.prompt.end());
  lm->prefill(0, head);
  lm->save_snapshot(0);
  EXPECT_EQ(lm->snapshot_position(0), static_cast<int64_t>(k));
  lm->prefill(1, std::vector<int32_t>{3, 1, 4, 1, 5}); // the other slot keeps going meanwhile
  lm->prefill(0, std::vector<int32_t>{9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4, 3});
  lm->restore_snapshot(0);
  EXPECT_EQ(lm->position(0), static_cast<int64_t>(k));
  const auto logits = lm->prefill(0, tail, LogitsFor::All);
  const int64_t V = fx.vocab;
  const std::vector<float> want(c.prompt_logits.begin() + static_cast<ptrdiff_t>(k * V), c.prompt_logits.end());
  EXPECT_LE(max_abs_diff(logits, want), kFixtureLogitsF32);
  EXPECT_EQ(lm->position(1), 5);
  lm->reset(0);
  EXPECT_EQ(lm->snapshot_position(0), -1) << "a reset slot's rows will be overwritten";
  EXPECT_NE(error_of([&] { lm->restore_snapshot(0); }).find("no snapshot"), std::string::npos);
}

// The paged KV cache: a slot takes blocks of kv_block_tokens() positions as its sequence grows,
// keeps them across reset, and gives them back with release_kv. A sequence whose blocks are
// scattered through the pool, interleaved with another slot's, gives bit for bit the logits of
// the same sequence alone in a fresh model (its blocks in order): the addressing through the
// table changes nothing but where rows lie.
TEST(CausalLmApi, KvBlocksFollowTheSequenceAndTheirPlaceChangesNothing) {
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  const int32_t vocab = static_cast<int32_t>(fx.checkpoint.config().vocab_size);
  std::vector<int32_t> prompt(150), other(134);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 7 + 3) % vocab);
  for (size_t i = 0; i < other.size(); ++i) other[i] = static_cast<int32_t>((i * 5 + 1) % vocab);
  const std::span<const int32_t> p(prompt), o(other);

  Backend alone_be = cpu_model_backend();
  auto alone = fixture_model(alone_be, fx, 256, 2, 16);
  const std::vector<float> want = alone->prefill(0, p, LogitsFor::All);
  const std::vector<float> want_next = decode_logits(*alone, std::vector<int32_t>{0}, std::vector<int32_t>{9});

  Backend be = cpu_model_backend();
  auto lm = fixture_model(be, fx, 256, 2, 16);
  const int32_t bt = lm->kv_block_tokens();
  ASSERT_EQ(bt, 64) << "the test's block arithmetic assumes 64-position blocks";
  EXPECT_EQ(lm->kv_blocks_total(), 2 * 4); // 2 slots x 256 positions
  EXPECT_EQ(lm->kv_blocks_free(), lm->kv_blocks_total());
  // Slot 1 first, then the two slots in turn: slot 0's blocks are the pool's 3rd, 5th and 6th.
  lm->prefill(1, o.first(70));
  std::vector<float> got = lm->prefill(0, p.first(64), LogitsFor::All);
  lm->prefill(1, o.subspan(70));
  const std::vector<float> rest = lm->prefill(0, p.subspan(64), LogitsFor::All);
  got.insert(got.end(), rest.begin(), rest.end());
  EXPECT_EQ(lm->kv_blocks_held(0), 3);
  EXPECT_EQ(lm->kv_blocks_held(1), 3);
  EXPECT_EQ(lm->kv_blocks_free(), 2);
  EXPECT_EQ(max_abs_diff(got, want), 0.0) << "prompt logits through a scattered table";
  EXPECT_EQ(max_abs_diff(decode_logits(*lm, std::vector<int32_t>{0}, std::vector<int32_t>{9}), want_next), 0.0)
      << "a decode step through a scattered table";

  lm->reset(1); // a retired sequence keeps its blocks (prompt reuse in the slot)
  EXPECT_EQ(lm->kv_blocks_held(1), 3);
  lm->release_kv(1);
  EXPECT_EQ(lm->position(1), 0);
  EXPECT_EQ(lm->kv_blocks_held(1), 0);
  EXPECT_EQ(lm->kv_blocks_free(), 5);
  EXPECT_FALSE(lm->reserve_kv(1, 257)) << "past max_context";
  EXPECT_EQ(lm->kv_blocks_free(), 5) << "a refused reservation takes nothing";
  EXPECT_TRUE(lm->reserve_kv(1, 256));
  EXPECT_EQ(lm->kv_blocks_held(1), 4);
  EXPECT_EQ(lm->kv_blocks_free(), 1);
  EXPECT_EQ(lm->kv_blocks_for(129), 3);

  // Slot 0 (151 positions, 3 blocks) reserved ahead to 256, then trimmed back to its position.
  lm->release_kv(1);
  ASSERT_EQ(lm->position(0), 151);
  EXPECT_TRUE(lm->reserve_kv(0, 256));
  EXPECT_EQ(lm->kv_blocks_held(0), 4);
  lm->trim_kv(0);
  EXPECT_EQ(lm->kv_blocks_held(0), 3);
  EXPECT_EQ(lm->kv_blocks_free(), lm->kv_blocks_total() - 3);
  EXPECT_EQ(max_abs_diff(decode_logits(*lm, std::vector<int32_t>{0}, std::vector<int32_t>{9}),
                         decode_logits(*alone, std::vector<int32_t>{0}, std::vector<int32_t>{9})),
            0.0)
      << "trimming the blocks past the position keeps the sequence";
}

// The KV block size (ModelOptions::kv_block_tokens) changes only how the pool is cut: the same
// logits bit for bit at 32, 64 and 256 positions per block, the pool's block count follows, and
// a size that is not a power of two from 32 to 1024 is refused naming the option.
TEST(CausalLmApi, KvBlockSizeChangesOnlyHowThePoolIsCut) {
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  const int32_t vocab = static_cast<int32_t>(fx.checkpoint.config().vocab_size);
  std::vector<int32_t> prompt(150);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 11 + 5) % vocab);
  std::vector<float> want, want_next;
  for (int32_t block : {64, 32, 256}) {
    ModelOptions o;
    o.max_context = 256;
    o.max_sequences = 2;
    o.prefill_chunk = 16;
    o.kv_block_tokens = block;
    Backend be = cpu_model_backend();
    auto lm = CausalLM::load(fx.checkpoint, be, o);
    EXPECT_EQ(lm->kv_block_tokens(), block);
    EXPECT_EQ(lm->options().kv_block_tokens, block);
    EXPECT_EQ(lm->kv_blocks_total(), 2 * ((256 + block - 1) / block));
    const std::vector<float> got = lm->prefill(1, prompt, LogitsFor::All);
    const std::vector<float> next = decode_logits(*lm, std::vector<int32_t>{1}, std::vector<int32_t>{9});
    if (want.empty()) {
      want = got;
      want_next = next;
      continue;
    }
    EXPECT_EQ(max_abs_diff(got, want), 0.0) << "prompt logits, blocks of " << block;
    EXPECT_EQ(max_abs_diff(next, want_next), 0.0) << "decode logits, blocks of " << block;
  }
  for (int32_t bad : {16, 48, 2048}) {
    ModelOptions o;
    o.max_context = 256;
    o.kv_block_tokens = bad;
    Backend be = cpu_model_backend();
    const std::string msg = error_of([&] { CausalLM::load(fx.checkpoint, be, o); });
    EXPECT_NE(msg.find("kv_block_tokens must be a power of two from 32 to 1024"), std::string::npos) << bad << ": " << msg;
  }
}
