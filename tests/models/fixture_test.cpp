// Every case of every fixture in tests/fixtures, and of the trained demo model (models/qwen3_5-demo,
// bf16 weights, its reference computed in float64 by transformers from those weights), on the
// CPU plugin in float32:
//  (a) prefill of the prompt: every row vs case{i}.prompt_logits            (max |diff| <= 1e-3)
//  (b) then greedy_ids decoded one step at a time, all cases batched in one decode per step:
//      each row vs case{i}.full_logits                                      (max |diff| <= 1e-3)
//  (c) greedy generation from the prompt reproduces greedy_ids wherever the reference margin
//      is above 1e-2 (after the first legitimate flip the sequences may diverge)
// Each fixture runs with the default prefill chunk and with a small odd one, so prompts cross
// chunk edges (KV cache and GDN state carried between forward passes).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstdio>

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
    o.kv_cache = KvCachePrecision::F32; // float32 arithmetic throughout (a CUDA backend's auto is float16)
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
    const auto logits = decode_logits(*lm, slots, ids);
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
      logits = decode_logits(*lm, std::vector<int32_t>{slot}, std::vector<int32_t>{next});
      ASSERT_EQ(logits.size(), static_cast<size_t>(V));
    }
    EXPECT_GT(compared, 0u) << "case " << i << ": not a single step compared";
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureTest,
                         testing::Values(Param{"tiny-qwen3", 512}, Param{"tiny-qwen3", 37},
                                         Param{"tiny-qwen3_5", 512}, Param{"tiny-qwen3_5", 37},
                                         Param{"tiny-qwen3_5-long", 512}, Param{"tiny-qwen3_5-long", 37},
                                         Param{"tiny-qwen3_5-vl-layout", 512}, Param{"tiny-qwen3_5-vl-layout", 3},
                                         Param{"models/qwen3_5-demo", 512}, Param{"models/qwen3_5-demo", 37}),
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

// A 16-bit KV cache against the float32 cache, on the same backend, fixture and weights
// (float32): per logits row, relative L2, over prompts fed in chunks of 37 (later chunks read
// the earlier ones back from the cache) and batched decode steps. Rounding K and V to a format
// with unit roundoff u moves each element by at most u of itself (about u / sqrt(3) on average),
// each attention output row by about that relative to its norm, and the logits by a similar
// relative amount after the remaining layers (errors of independent elements add in
// quadrature, and the residual stream carries the unrounded part). Measured on the CPU plugin
// (tiny-qwen3, every row of every case): float16 (u = 2^-11 = 4.9e-4) worst 4.0e-4, bfloat16
// (u = 2^-8 = 3.9e-3) worst 2.8e-3, the 8x of their unit roundoffs. The tolerances are about
// 3.7x those: a cache that is read wrong (wrong element type, a row misplaced, a stale key)
// moves rows by O(1), and bf16 rounding where f16 was asked (2.8e-3) fails the f16 bound. The
// CUDA plugin's kernels round K and V the same way, so the same bounds hold there. Only the
// dense Qwen3 fixture: the Qwen3.5 fixtures amplify any rounding inside the model ~1000x (see
// FixtureBf16).
struct KvCacheTolerance {
  const char* name;
  KvCachePrecision kv;
  double rel_l2;
};
constexpr KvCacheTolerance kKvCacheF16{"f16-kv-cache-logits-row-rel-l2", KvCachePrecision::F16, 1.5e-3};
constexpr KvCacheTolerance kKvCacheBf16{"bf16-kv-cache-logits-row-rel-l2", KvCachePrecision::BF16, 1e-2};

void PrintTo(const KvCacheTolerance& t, std::ostream* os) { *os << t.name << " " << t.rel_l2; }

class FixtureKvCache : public testing::TestWithParam<KvCacheTolerance> {};

TEST_P(FixtureKvCache, SixteenBitCacheStaysWithinItsRoundingOfTheFloat32Cache) {
  const KvCacheTolerance& tol = GetParam();
  const Fixture fx = Fixture::load("tiny-qwen3");
  NINFER_FIXTURE_BACKEND(be);
  ModelOptions o;
  o.max_context = 1024;
  o.max_sequences = static_cast<int32_t>(fx.cases.size());
  o.prefill_chunk = 37;
  o.weights = WeightPrecision::F32;
  o.kv_cache = KvCachePrecision::F32;
  const auto kv_bytes = [&] { return be->memory().in_use[static_cast<size_t>(MemoryUse::KvCache)]; };
  auto ref = CausalLM::load(fx.checkpoint, *be, o);
  const size_t f32_bytes = kv_bytes();
  o.kv_cache = tol.kv;
  auto lm = CausalLM::load(fx.checkpoint, *be, o);
  EXPECT_EQ(lm->options().kv_cache, tol.kv);
  EXPECT_EQ(2 * (kv_bytes() - f32_bytes), f32_bytes) << "a 16-bit cache is half the float32 one";

  const int64_t V = fx.vocab;
  double worst = 0;
  auto check = [&](const std::vector<float>& got, const std::vector<float>& want, int64_t rows, const std::string& what) {
    for (int64_t r = 0; r < rows; ++r) {
      const double e = rel_l2(row(got, r, V), row(want, r, V));
      worst = std::max(worst, e);
      ASSERT_LE(e, tol.rel_l2) << what << " row " << r << " (tolerance " << tol.name << ")";
    }
  };
  for (size_t i = 0; i < fx.cases.size(); ++i) {
    const auto& prompt = fx.cases[i].prompt;
    const auto slot = static_cast<int32_t>(i);
    check(lm->prefill(slot, prompt, LogitsFor::All), ref->prefill(slot, prompt, LogitsFor::All),
          static_cast<int64_t>(prompt.size()), fmt::format("case {} prompt", i));
  }
  size_t steps = 0;
  for (const auto& c : fx.cases) steps = std::max(steps, c.greedy.size());
  for (size_t j = 0; j < steps; ++j) {
    std::vector<int32_t> slots, ids;
    for (size_t i = 0; i < fx.cases.size(); ++i)
      if (j < fx.cases[i].greedy.size()) {
        slots.push_back(static_cast<int32_t>(i));
        ids.push_back(fx.cases[i].greedy[j]);
      }
    check(decode_logits(*lm, slots, ids), decode_logits(*ref, slots, ids), static_cast<int64_t>(slots.size()),
          fmt::format("decode step {}", j));
  }
  std::printf("%s KV cache vs float32 cache: worst logits row relative L2 %.3g (tolerance %s %.3g)\n",
              to_string(tol.kv), worst, tol.name, tol.rel_l2);
}

INSTANTIATE_TEST_SUITE_P(Qwen3, FixtureKvCache, testing::Values(kKvCacheF16, kKvCacheBf16),
                         [](const testing::TestParamInfo<KvCacheTolerance>& p) {
                           return std::string(p.param.kv == KvCachePrecision::F16 ? "float16" : "bfloat16");
                         });

// kv_dtype auto: float32 on the CPU reference, float16 on CUDA (docs/manifest.md).
TEST(FixtureKvCache, AutoIsFloat32OnTheCpuPluginAndFloat16OnCuda) {
  const Fixture fx = Fixture::load("tiny-qwen3");
  NINFER_FIXTURE_BACKEND(be);
  ModelOptions o;
  o.max_context = 64;
  const auto lm = CausalLM::load(fx.checkpoint, *be, o);
#ifdef NINFER_FIXTURES_ON_CUDA
  EXPECT_EQ(lm->options().kv_cache, KvCachePrecision::F16);
#else
  EXPECT_EQ(lm->options().kv_cache, KvCachePrecision::F32);
#endif
}

} // namespace
