// ninfer-serve's warm-up (ninfer/serving/warm_up.hpp): the counts it runs, and a model it leaves
// as it found it, on the CPU plugin against the transformers fixture.
#include <gtest/gtest.h>

#include <numeric>

#include "../models/model_test_env.hpp"
#include "ninfer/abi/row_buckets.h"
#include "ninfer/serving/engine.hpp"
#include "ninfer/serving/warm_up.hpp"

using namespace ninfer;
using namespace ninfer::serving;
using namespace ninfer::test;

TEST(RowBuckets, TopsFollowTheDocumentedSteps) {
  for (int64_t r = 1; r <= 16; ++r) EXPECT_EQ(ninfer_row_bucket(r), r);
  EXPECT_EQ(ninfer_row_bucket(17), 32);
  EXPECT_EQ(ninfer_row_bucket(101), 112);
  EXPECT_EQ(ninfer_row_bucket(256), 256);
  EXPECT_EQ(ninfer_row_bucket(257), 320);
  EXPECT_EQ(ninfer_row_bucket(1024), 1024);
  EXPECT_EQ(ninfer_row_bucket(1025), 1280);
  EXPECT_EQ(ninfer_row_bucket(2047), 2048);
  // A top is its own bucket's top, and every count lies at or below its top.
  for (int64_t r = 1; r <= 5000; ++r) {
    const int64_t top = ninfer_row_bucket(r);
    EXPECT_GE(top, r);
    EXPECT_EQ(ninfer_row_bucket(top), top) << r;
  }
}

TEST(WarmUp, CountsAreEveryBucketTopThenTheLimit) {
  std::vector<int64_t> want(16);
  std::iota(want.begin(), want.end(), 1);
  want.push_back(32);
  want.push_back(40);
  EXPECT_EQ(warm_up_counts(40), want);
  want.resize(16);
  EXPECT_EQ(warm_up_counts(16), want);
  const std::vector<int64_t> full = warm_up_counts(2048);
  EXPECT_EQ(full.size(), 16u + 15u + 12u + 4u); // 1-16, 32-256 by 16, 320-1024 by 64, 1280-2048 by 256
  EXPECT_EQ(full.back(), 2048);
  EXPECT_TRUE(warm_up_counts(0).empty());
  // Nothing above the most rows a library call takes: 8,192-token chunks run in pieces of 4,096.
  const std::vector<int64_t> wide = warm_up_counts(8192);
  EXPECT_EQ(wide.size(), 16u + 15u + 12u + 12u);
  EXPECT_EQ(wide.back(), NINFER_ROW_BUCKET_MOST);
  EXPECT_EQ(warm_up_counts(5000), wide);
}

TEST(WarmUp, LeavesTheSlotEmptyAndGenerationUnchanged) {
  for (const char* name : {"tiny-qwen3", "tiny-qwen3_5"}) { // dense, and Gated DeltaNet state
    SCOPED_TRACE(name);
    const Fixture fx = Fixture::load(name);
    Backend be = cpu_model_backend();
    ModelOptions o;
    o.max_context = 256;
    o.max_sequences = 2;
    o.prefill_chunk = 7;
    auto lm = CausalLM::load(fx.checkpoint, be, o);
    const int64_t blocks = lm->kv_blocks_free();

    // A slot that holds tokens is refused, and keeps them.
    lm->prefill(1, std::vector<int32_t>{1, 2, 3});
    EXPECT_THROW(warm_up(*lm, 1, 8), Error);
    EXPECT_EQ(lm->position(1), 3);
    lm->release_kv(1);

    const WarmUp w = warm_up(*lm, 0, 40);
    EXPECT_EQ(w.passes, 18);
    EXPECT_EQ(w.tokens, 16 * 17 / 2 + 32 + 40);
    EXPECT_EQ(lm->position(0), 0);
    EXPECT_EQ(lm->kv_blocks_held(0), 0);
    EXPECT_EQ(lm->kv_blocks_free(), blocks);

    // Greedy generation afterwards, in either slot, still matches transformers.
    Engine engine(*lm, nullptr, {8});
    for (const FixtureCase& c : fx.cases) {
      size_t trusted = 0;
      while (trusted < c.greedy.size() && c.margin[trusted] > kGreedyMargin) ++trusted;
      ASSERT_GT(trusted, 0u);
      GenerationRequest r;
      r.prompt_ids = c.prompt;
      r.sampling.temperature = 0;
      r.max_new_tokens = static_cast<int64_t>(trusted);
      const ServeResult res = engine.submit(r)->wait();
      ASSERT_EQ(res.generated_ids.size(), trusted) << res.error;
      for (size_t s = 0; s < trusted; ++s) EXPECT_EQ(res.generated_ids[s], c.greedy[s]) << "step " << s;
    }
  }
}
