// Mixed steps (CausalLM::queue_step with a prompt chunk first and one-token rows after it: one
// forward pass for both). Against the transformers fixtures: every chunk row and every decode
// row of a mixed step equals the teacher-forced reference logits, on the dense and the hybrid
// fixture, with the prompt crossing several mixed steps and ending inside one (its pick is the
// first token). On the CPU plugin also bit for bit against the same rows run as steps of one
// kind (a chunk alone, then a decode step), greedy and sampled picks alike. Then the API's
// refusals and the load-time limits of the chunk.
#include <gtest/gtest.h>

#include "model_test_env.hpp"
#include "ninfer/models/mixed_chunk.hpp"
#include "ninfer/support/error.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

constexpr int32_t kMixedChunk = 16; // the 130-token prompt crosses 9 mixed steps, its last of 2 tokens

std::unique_ptr<CausalLM> mixed_model(Backend& be, const Fixture& fx, int32_t prefill_chunk) {
  ModelOptions o;
  o.max_context = 1024;
  o.max_sequences = 3;
  o.prefill_chunk = prefill_chunk;
  o.mixed_chunk = kMixedChunk;
  o.weights = WeightPrecision::F32;
  o.kv_cache = KvCachePrecision::F32; // float32 arithmetic throughout (a CUDA backend's auto is float16)
  return CausalLM::load(fx.checkpoint, be, o);
}

// The fixture case read in mixed steps (the longest prompt) and the two decoded beside it.
struct Cases {
  size_t reader = 0;
  std::vector<size_t> decoders;
};
Cases cases_of(const Fixture& fx) {
  Cases c;
  for (size_t i = 1; i < fx.cases.size(); ++i)
    if (fx.cases[i].prompt.size() > fx.cases[c.reader].prompt.size()) c.reader = i;
  for (size_t i = 0; i < fx.cases.size() && c.decoders.size() < 2; ++i)
    if (i != c.reader) c.decoders.push_back(i);
  return c;
}

} // namespace

// Slots 0 and 1 decode their cases' greedy ids (teacher-forced, logits rows brought back) while
// slot 2 reads the longest prompt in chunks of kMixedChunk beside them; then all three decode.
// Each chunk's rows (last_step_logits) are its prompt_logits rows, each decode row its
// full_logits row, and the chunk that ends the prompt picks the reference's first token.
TEST(MixedStep, ChunkAndDecodeRowsOfOneStepMatchTheTeacherForcedReference) {
  NINFER_FIXTURE_BACKEND(be);
  for (const char* name : {"tiny-qwen3", "tiny-qwen3_5"}) {
    const Fixture fx = Fixture::load(name);
    for (int32_t prefill_chunk : {512, 37}) {
      auto lm = mixed_model(*be, fx, prefill_chunk);
      const int64_t V = fx.vocab;
      const Cases c = cases_of(fx);
      const FixtureCase& rc = fx.cases[c.reader];
      const auto P = static_cast<int64_t>(rc.prompt.size());
      ASSERT_GT(P, 2 * kMixedChunk) << name;
      for (size_t d = 0; d < c.decoders.size(); ++d)
        lm->prefill(static_cast<int32_t>(d), fx.cases[c.decoders[d]].prompt);
      int64_t read = 0, mixed = 0;
      for (size_t j = 0; read < P; ++j) {
        const int64_t n = std::min<int64_t>(kMixedChunk, P - read);
        const bool last = read + n == P;
        const auto ids = std::span(rc.prompt).subspan(static_cast<size_t>(read), static_cast<size_t>(n));
        std::vector<StepRow> rows;
        rows.push_back({.slot = 2, .ids = ids, .pick = last});
        std::vector<int64_t> positions; // each decode row's full_logits row
        for (size_t d = 0; d < c.decoders.size(); ++d) {
          const FixtureCase& dc = fx.cases[c.decoders[d]];
          if (j >= dc.greedy.size()) continue;
          rows.push_back({.slot = static_cast<int32_t>(d), .ids = std::span(&dc.greedy[j], 1), .logits = true});
          positions.push_back(static_cast<int64_t>(dc.prompt.size() + j));
        }
        mixed += rows.size() > 1;
        lm->queue_step(rows);
        const std::vector<float> chunk = lm->last_step_logits(0, n);
        for (int64_t r = 0; r < n; ++r)
          ASSERT_LE(max_abs_diff(row(chunk, r, V), row(rc.prompt_logits, read + r, V)), kFixtureLogitsF32)
              << name << " prompt row " << read + r << " read in step " << j;
        const StepResult got = lm->next_result();
        ASSERT_EQ(got.ids.size(), rows.size()) << "a step picks all its rows";
        if (last)
          EXPECT_TRUE(got.ids[0] == rc.greedy[0] || rc.margin[0] <= kGreedyMargin)
              << name << ": the chunk that ends the prompt picked " << got.ids[0] << ", reference " << rc.greedy[0];
        for (size_t b = 0; b < positions.size(); ++b) {
          const FixtureCase& dc = fx.cases[c.decoders[b]];
          if (positions[b] >= static_cast<int64_t>(dc.full_logits.size() / V)) continue; // no reference row
          ASSERT_LE(max_abs_diff(row(got.logits, static_cast<int64_t>(b), V), row(dc.full_logits, positions[b], V)),
                    kFixtureLogitsF32)
              << name << " case " << c.decoders[b] << " decode row at position " << positions[b] << " in step " << j;
        }
        read += n;
      }
      EXPECT_GE(mixed, 2) << name << ": the prompt must cross several mixed steps";
      // The prompt's slot decodes on from its last chunk like any other.
      const std::vector<int32_t> slot2{2};
      const std::vector<int32_t> first{rc.greedy[0]};
      const std::vector<float> next = decode_logits(*lm, slot2, first);
      EXPECT_LE(max_abs_diff(next, row(rc.full_logits, P, V)), kFixtureLogitsF32) << name;
    }
  }
}

#ifndef NINFER_FIXTURES_ON_CUDA
// On the CPU plugin a mixed step computes each row as a step of one kind would, bit for bit:
// its row-wise ops are row-independent, and the ops that follow sequences run over the chunk and
// over the one-token rows as separate calls (core/models/step_parts.hpp), taking the routes of a
// prompt chunk and of a decode step. Rows chained from the previous pick, greedy and sampled.
TEST(MixedStep, RowsComputeBitForBitAsInStepsOfOneKind) {
  for (const char* name : {"tiny-qwen3", "tiny-qwen3_5"}) {
    const Fixture fx = Fixture::load(name);
    Backend be = cpu_model_backend();
    auto mixed = mixed_model(be, fx, 37);
    auto apart = mixed_model(be, fx, 37);
    const Cases c = cases_of(fx);
    const FixtureCase& rc = fx.cases[c.reader];
    const auto P = static_cast<int64_t>(rc.prompt.size());
    std::vector<int32_t> first;
    for (size_t d = 0; d < c.decoders.size(); ++d) {
      const auto slot = static_cast<int32_t>(d);
      first.push_back(argmax(mixed->prefill(slot, fx.cases[c.decoders[d]].prompt)));
      apart->prefill(slot, fx.cases[c.decoders[d]].prompt);
    }
    // Row 0 greedy, row 1 drawn at temperature 0.9 from seed 7 (draw j at step j).
    const auto decode_rows = [&](size_t j, bool chained) {
      std::vector<StepRow> rows;
      for (size_t d = 0; d < first.size(); ++d) {
        StepRow r{.slot = static_cast<int32_t>(d)};
        if (!chained) r.ids = std::span(&first[d], 1);
        if (d == 1) r.sampling = {.temperature = 0.9, .seed = 7, .draw = j};
        rows.push_back(r);
      }
      return rows;
    };
    int64_t read = 0;
    for (size_t j = 0; read < P; ++j) {
      const int64_t n = std::min<int64_t>(kMixedChunk, P - read);
      const bool last = read + n == P;
      const auto ids = std::span(rc.prompt).subspan(static_cast<size_t>(read), static_cast<size_t>(n));
      const StepRow chunk{.slot = 2, .ids = ids, .pick = last};
      std::vector<StepRow> rows{chunk};
      for (const StepRow& r : decode_rows(j, j > 0)) rows.push_back(r);
      mixed->queue_step(rows);
      const std::vector<float> mixed_chunk = mixed->last_step_logits(0, n);
      const StepResult m = mixed->next_result();
      apart->queue_step(std::span(&chunk, 1));
      const std::vector<float> apart_chunk = apart->last_step_logits(0, n);
      StepResult a_chunk;
      if (last) a_chunk = apart->next_result();
      apart->queue_step(decode_rows(j, j > 0));
      const StepResult a = apart->next_result();
      EXPECT_EQ(mixed_chunk, apart_chunk) << name << " chunk rows of step " << j;
      ASSERT_EQ(m.ids.size(), 1 + a.ids.size());
      if (last) {
        EXPECT_EQ(m.ids[0], a_chunk.ids[0]) << name << ": the prompt's first token";
        EXPECT_EQ(m.logprobs[0], a_chunk.logprobs[0]) << name;
      }
      for (size_t b = 0; b < a.ids.size(); ++b) {
        EXPECT_EQ(m.ids[1 + b], a.ids[b]) << name << " decode row " << b << " of step " << j;
        EXPECT_EQ(m.logprobs[1 + b], a.logprobs[b]) << name << " decode row " << b << " of step " << j;
      }
      read += n;
    }
    // Then all three decode, fed by their picks: still the same.
    for (size_t j = 0; j < 4; ++j) {
      const std::vector<StepRow> rows{{.slot = 0}, {.slot = 1}, {.slot = 2}};
      mixed->queue_step(rows);
      apart->queue_step(rows);
      EXPECT_EQ(mixed->next_result().ids, apart->next_result().ids) << name << " decode step " << j << " after";
    }
  }
}
#endif

// A chunk beside other rows is the step's first row and at most mixed_chunk tokens (the
// activations are sized for it); refusals leave the model unchanged. mixed_chunk is at most
// prefill_chunk, and 0 takes the cost rule's chunk.
TEST(MixedStep, ChunkLimitsAreCheckedAndLeaveTheModelUnchanged) {
  NINFER_FIXTURE_BACKEND(be);
  const Fixture fx = Fixture::load("tiny-qwen3_5");
  auto lm = mixed_model(*be, fx, 37);
  EXPECT_EQ(lm->options().mixed_chunk, kMixedChunk);
  lm->prefill(0, fx.cases[0].prompt);
  const int64_t at = lm->position(0);
  const std::vector<int32_t> long_chunk(kMixedChunk + 1, 5), one{7};
  const std::vector<StepRow> too_long = {{.slot = 1, .ids = long_chunk}, {.slot = 0, .ids = one}};
  EXPECT_NE(error_of([&] { lm->queue_step(too_long); }).find("mixed_chunk"), std::string::npos);
  const std::vector<StepRow> chunk_second = {{.slot = 0, .ids = one},
                                             {.slot = 1, .ids = std::span(long_chunk).first(3)}};
  EXPECT_NE(error_of([&] { lm->queue_step(chunk_second); }).find("first row"), std::string::npos);
  EXPECT_EQ(lm->position(0), at);
  EXPECT_EQ(lm->position(1), 0);
  // Alone, a chunk may be up to prefill_chunk tokens.
  lm->queue_step(std::span(too_long).first(1));
  EXPECT_EQ(lm->position(1), kMixedChunk + 1);
  EXPECT_NE(error_of([&] { lm->last_step_logits(0, kMixedChunk + 2); }).find("step of"), std::string::npos);

  ModelOptions o;
  o.max_context = 64;
  o.max_sequences = 2;
  o.prefill_chunk = 16;
  o.mixed_chunk = 17;
  EXPECT_NE(error_of([&] { CausalLM::load(fx.checkpoint, *be, o); }).find("mixed_chunk"), std::string::npos);
  o.mixed_chunk = 0;
  auto ruled = CausalLM::load(fx.checkpoint, *be, o);
  EXPECT_GE(ruled->options().mixed_chunk, 1);
  EXPECT_LE(ruled->options().mixed_chunk, o.prefill_chunk);
}
