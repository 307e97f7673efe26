#include <gtest/gtest.h>

#include "ninfer/abi/ops/argmax.h"
#include "op_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

// Greedy choice and its log-probability vs a float64 oracle, with planted ties (lowest id
// wins), -inf entries, and a NaN row (id -1).
TEST(ArgmaxOp, GreedyIdAndLogprobPerRow) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("argmax");
  const int32_t vocab = 1000;
  const int64_t rows = 9, stride = vocab + 3;
  auto logits = randn(rng, rows * stride, 4.f);
  std::uniform_int_distribution<int32_t> pick(0, vocab - 1);
  // Row 1: a tie between two ids at the maximum; row 2: half the row -inf; row 3: a NaN.
  const int32_t a = pick(rng), b = pick(rng);
  logits[1 * stride + a] = logits[1 * stride + b] = 50.f;
  for (int32_t j = 0; j < vocab; j += 2) logits[2 * stride + j] = -INFINITY;
  logits[3 * stride + pick(rng)] = NAN;
  std::vector<int32_t> ids(rows, -7);
  auto lp = poisoned(rows);
  ninfer_argmax_args args{logits.data(), stride, ids.data(), lp.data(), rows, vocab};
  be.run(NINFER_OP_ARGMAX, {rows, {vocab, 0, 0, 0}, NINFER_DTYPE_F32}, &args);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits.data() + r * stride;
    if (r == 3) {
      EXPECT_EQ(ids[r], -1);
      continue;
    }
    int32_t best = 0;
    for (int32_t j = 1; j < vocab; ++j)
      if (row[j] > row[best]) best = j;
    double sum = 0;
    for (int32_t j = 0; j < vocab; ++j) sum += std::exp(double(row[j]) - row[best]);
    EXPECT_EQ(ids[r], best) << "row " << r;
    EXPECT_NEAR(lp[r], -std::log(sum), 1e-5) << "row " << r;
  }
  EXPECT_EQ(ids[1], std::min(a, b));
}
