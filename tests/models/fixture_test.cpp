// Every case of every fixture in tests/fixtures, on the CPU plugin in float32:
//  (a) prefill of the prompt: every row vs case{i}.prompt_logits            (max |diff| <= 1e-3)
//  (b) then greedy_ids decoded one step at a time, all cases batched in one decode per step:
//      each row vs case{i}.full_logits                                      (max |diff| <= 1e-3)
//  (c) greedy generation from the prompt reproduces greedy_ids wherever the reference margin
//      is above 1e-2 (after the first legitimate flip the sequences may diverge)
// Each fixture runs with the default prefill chunk and with a small odd one, so prompts cross
// chunk edges (KV cache and GDN state carried between forward passes).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "model_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

// Rows that float32 arithmetic does not reproduce within kFixtureLogitsF32, whoever does it.
// Qwen3.5's reference runs its Gated DeltaNet and norms in float32 even in a float64 model, and
// on these rows a GDN head's output falls far below the gated norm's eps (layer 2, head 3 of
// this row: RMS 1.1e-4 against sqrt(eps) = 1e-3), so the norm multiplies float32 rounding of
// that output by ~1000. Measured distances from the fixture on this row: transformers 5.17.0 /
// torch 2.11 (the fixture's own versions) rerun on the H200 host's CPU 2.79e-3; the CPU plugin
// 1.7e-3; the CUDA plugin (float32 GDN, another summation order) 2.95e-3. Every other row of
// every fixture agrees within 1e-3 on both plugins. Such a row is held to the float32 spread
// of this row (the largest of those, rounded up), and nowhere else is anything relaxed.
struct IllConditionedRow {
  const char* fixture;
  size_t case_index;
  int64_t row;
  double float32_spread; // largest measured |float32 implementation - fixture| on this row, rounded up
};
constexpr IllConditionedRow kIllConditionedRows[] = {{"tiny-qwen3_5-long", 0, 62, 3.0e-3}};

double prompt_row_tolerance(const std::string& fixture, size_t case_index, int64_t row) {
  for (const auto& r : kIllConditionedRows)
    if (fixture == r.fixture && case_index == r.case_index && row == r.row)
      return std::max(kFixtureLogitsF32, r.float32_spread);
  return kFixtureLogitsF32;
}

struct Param {
  const char* fixture;
  int32_t prefill_chunk;
};

void PrintTo(const Param& p, std::ostream* os) { *os << p.fixture << " prefill_chunk " << p.prefill_chunk; }

std::string param_name(const testing::TestParamInfo<Param>& p) {
  std::string n = fmt::format("{}_chunk{}", p.param.fixture, p.param.prefill_chunk);
  for (auto& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

class FixtureTest : public testing::TestWithParam<Param> {
 protected:
  void SetUp() override { fx_ = std::make_unique<Fixture>(Fixture::load(GetParam().fixture)); }

  std::unique_ptr<CausalLM> load_model(Backend& be) {
    ModelOptions o;
    o.max_context = 1024;
    o.max_sequences = static_cast<int32_t>(fx_->cases.size());
    o.prefill_chunk = GetParam().prefill_chunk;
    o.weights = WeightPrecision::F32;
    return CausalLM::load(fx_->checkpoint, be, o);
  }

  std::unique_ptr<Fixture> fx_;
};

TEST_P(FixtureTest, PrefillAndBatchedDecodeMatchTeacherForcedLogits) {
  NINFER_FIXTURE_BACKEND(be);
  auto lm = load_model(*be);
  const int64_t V = fx_->vocab;
  const auto& cases = fx_->cases;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const int64_t P = static_cast<int64_t>(c.prompt.size());
    const auto logits = lm->prefill(static_cast<int32_t>(i), c.prompt, LogitsFor::All);
    ASSERT_EQ(logits.size(), static_cast<size_t>(P * V));
    for (int64_t r = 0; r < P; ++r)
      ASSERT_LE(max_abs_diff(row(logits, r, V), row(c.prompt_logits, r, V)), prompt_row_tolerance(fx_->name, i, r))
          << "case " << i << " prompt row " << r << " of " << P;
  }
  // Decode step j feeds greedy_ids[j] of every case in one batch; its row is full row P + j.
  size_t steps = 0;
  for (const auto& c : cases) steps = std::max(steps, c.greedy.size());
  for (size_t j = 0; j < steps; ++j) {
    std::vector<int32_t> slots, ids;
    for (size_t i = 0; i < cases.size(); ++i)
      if (j < cases[i].greedy.size()) {
        slots.push_back(static_cast<int32_t>(i));
        ids.push_back(cases[i].greedy[j]);
      }
    const auto logits = lm->decode(slots, ids);
    for (size_t b = 0; b < slots.size(); ++b) {
      const auto& c = cases[slots[b]];
      const int64_t r = static_cast<int64_t>(c.prompt.size() + j);
      if (r >= static_cast<int64_t>(c.full_logits.size() / V)) continue; // the last id has no reference row
      ASSERT_LE(max_abs_diff(row(logits, static_cast<int64_t>(b), V), row(c.full_logits, r, V)), kFixtureLogitsF32)
          << "case " << slots[b] << " decode step " << j << " (position " << r << ")";
    }
  }
}

TEST_P(FixtureTest, GreedyGenerationReproducesReferenceIds) {
  NINFER_FIXTURE_BACKEND(be);
  auto lm = load_model(*be);
  const int64_t V = fx_->vocab;
  for (size_t i = 0; i < fx_->cases.size(); ++i) {
    const auto& c = fx_->cases[i];
    const int32_t slot = static_cast<int32_t>(i);
    std::vector<float> logits = lm->prefill(slot, c.prompt);
    size_t compared = 0;
    for (size_t j = 0; j < c.greedy.size(); ++j) {
      const int32_t next = argmax(logits);
      if (next != c.greedy[j]) {
        ASSERT_LE(c.margin[j], kGreedyMargin)
            << "case " << i << " step " << j << ": generated " << next << ", reference " << c.greedy[j]
            << " with a top-2 margin of " << c.margin[j];
        break; // a legitimate flip: from here the sequences diverge
      }
      ++compared;
      logits = lm->decode(std::vector<int32_t>{slot}, std::vector<int32_t>{next});
      ASSERT_EQ(logits.size(), static_cast<size_t>(V));
    }
    EXPECT_GT(compared, 0u) << "case " << i << ": not a single step compared";
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureTest,
                         testing::Values(Param{"tiny-qwen3", 512}, Param{"tiny-qwen3", 37},
                                         Param{"tiny-qwen3_5", 512}, Param{"tiny-qwen3_5", 37},
                                         Param{"tiny-qwen3_5-long", 512}, Param{"tiny-qwen3_5-long", 37},
                                         Param{"tiny-qwen3_5-vl-layout", 512}, Param{"tiny-qwen3_5-vl-layout", 3}),
                         param_name);

// bfloat16 weights: within the README's bf16 guidance (relative L2 per row, top-1 agreement
// where the reference margin is large), never by loosening the float32 tolerance.
// Only the dense Qwen3 fixture: the Qwen3.5 fixtures' random GDN layers put heads far below the
// gated norm's eps, which amplifies weight rounding ~1000x. transformers itself, with the same
// matrices rounded to bfloat16 and float64 arithmetic, is off its own fixture by a relative L2
// of up to 0.057 (tiny-qwen3_5), 0.195 (vl-layout) and 1.25 (long) per row, so no bf16
// tolerance is meaningful there (docs/models.md).
TEST(FixtureBf16, Qwen3Bf16WeightsStayWithinBf16Guidance) {
  const Fixture fx = Fixture::load("tiny-qwen3");
  NINFER_FIXTURE_BACKEND(be);
  ModelOptions o;
  o.max_context = 1024;
  o.max_sequences = static_cast<int32_t>(fx.cases.size());
  o.weights = WeightPrecision::BF16;
  auto lm = CausalLM::load(fx.checkpoint, *be, o);
  const int64_t V = fx.vocab;
  for (size_t i = 0; i < fx.cases.size(); ++i) {
    const auto& c = fx.cases[i];
    const auto logits = lm->prefill(static_cast<int32_t>(i), c.prompt, LogitsFor::All);
    for (int64_t r = 0; r < static_cast<int64_t>(c.prompt.size()); ++r) {
      const auto got = row(logits, r, V), want = row(c.prompt_logits, r, V);
      ASSERT_LE(rel_l2(got, want), kFixtureRowRelL2Bf16) << "case " << i << " prompt row " << r;
    }
    // The last prompt row predicts greedy_ids[0]; where the reference is sure, so must we be.
    if (c.margin[0] > 0.5) {
      EXPECT_EQ(argmax(row(logits, static_cast<int64_t>(c.prompt.size()) - 1, V)), c.greedy[0]);
    }
  }
}

} // namespace
