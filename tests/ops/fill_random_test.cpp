#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "ninfer/abi/ops/fill_random.h"
#include "ninfer/checkpoint/checkpoint.hpp"
#include "op_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

// The contract's value of element i, computed here in double (the plugin rounds its product and
// its sum to float separately, so the two agree within one float ulp of the result).
double oracle(uint64_t seed, int64_t i, double scale, double offset) {
  uint64_t z = seed ^ (static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return offset + scale * (std::ldexp(static_cast<double>(z >> 40), -23) - 1.0);
}

constexpr double kOneUlp = 0x1.0p-23; // relative, float32

void fill(Backend& be, void* out, int64_t count, uint64_t seed, float scale, float offset, int32_t dtype) {
  ninfer_fill_random_args a{out, count, seed, scale, offset, dtype};
  ninfer_shape s{};
  s.tokens = (count + NINFER_FILL_RANDOM_ROW - 1) / NINFER_FILL_RANDOM_ROW;
  s.dtype = dtype;
  be.run(NINFER_OP_FILL_RANDOM, s, &a);
}

} // namespace

// Every element as the contract defines it, a count that ends mid-row, and the statistics a
// uniform [offset - scale, offset + scale) sample must have.
TEST(FillRandomOp, F32MatchesTheContractAndIsUniform) {
  Backend be = cpu_backend();
  const int64_t n = 3 * NINFER_FILL_RANDOM_ROW + 123;
  const float scale = 0.5f, offset = 2.0f;
  auto out = poisoned(n + 4);
  fill(be, out.data(), n, 42, scale, offset, NINFER_DTYPE_F32);
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double want = oracle(42, i, scale, offset);
    ASSERT_NEAR(out[i], want, std::abs(want) * kOneUlp * 2) << i;
    ASSERT_GE(out[i], offset - scale);
    ASSERT_LT(out[i], offset + scale);
    sum += out[i];
    sq += (out[i] - offset) * (out[i] - offset);
  }
  for (int64_t i = n; i < n + 4; ++i) EXPECT_TRUE(std::isnan(out[i])) << "wrote past count at " << i;
  // Mean and deviation of U(-s, s) + o: o and s / sqrt(3); 12k samples put both well within 3%.
  EXPECT_NEAR(sum / n, offset, 0.03 * scale);
  EXPECT_NEAR(std::sqrt(sq / n), scale / std::sqrt(3.0), 0.03 * scale);
}

// BF16 output is the F32 value rounded to nearest even; another seed gives other values.
TEST(FillRandomOp, Bf16IsTheRoundedF32AndSeedsDiffer) {
  Backend be = cpu_backend();
  const int64_t n = NINFER_FILL_RANDOM_ROW + 7;
  auto f32 = poisoned(n);
  std::vector<uint16_t> b16(n, 0xFFFF);
  fill(be, f32.data(), n, 7, 0.0346f, 0.f, NINFER_DTYPE_F32);
  fill(be, b16.data(), n, 7, 0.0346f, 0.f, NINFER_DTYPE_BF16);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(b16[i], f32_to_bf16(f32[i])) << i;
  auto other = poisoned(n);
  fill(be, other.data(), n, 8, 0.0346f, 0.f, NINFER_DTYPE_F32);
  int64_t same = 0;
  for (int64_t i = 0; i < n; ++i) same += other[i] == f32[i];
  EXPECT_LT(same, n / 100);
}

// Code bytes of quantized weights: byte i is the top byte of element i's hash (FP8 with bit 6
// cleared, so every code is finite), the count ends mid-row and nothing past it is written, and
// the codes are uniform enough to stand for quantized random weights.
TEST(FillRandomOp, CodeBytesMatchTheContract) {
  Backend be = cpu_backend();
  const int64_t n = 2 * NINFER_FILL_RANDOM_ROW + 51;
  for (int32_t dtype : {NINFER_DTYPE_INT4, NINFER_DTYPE_INT8, NINFER_DTYPE_FP8_E4M3}) {
    std::vector<uint8_t> out(static_cast<size_t>(n) + 4, 0x5A);
    fill(be, out.data(), n, 11, 0.f, 0.f, dtype);
    std::vector<int64_t> hist(256, 0);
    for (int64_t i = 0; i < n; ++i) {
      uint64_t z = 11 ^ (static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      const auto want = static_cast<uint8_t>(dtype == NINFER_DTYPE_FP8_E4M3 ? (z >> 56) & 0xBF : z >> 56);
      ASSERT_EQ(out[i], want) << "dtype " << dtype << " byte " << i;
      ++hist[out[i]];
    }
    for (int64_t i = n; i < n + 4; ++i) EXPECT_EQ(out[i], 0x5A) << "wrote past count at " << i;
    if (dtype == NINFER_DTYPE_FP8_E4M3) {
      for (int b = 0; b < 256; ++b)
        if (b & 0x40) EXPECT_EQ(hist[b], 0) << "fp8 code with exponent bit 3 set: " << b;
    } else {
      // 8,243 bytes over 256 values (32 expected each): no value absent or three times too frequent.
      for (int b = 0; b < 256; ++b) {
        EXPECT_GT(hist[b], 0) << b;
        EXPECT_LT(hist[b], 96) << b;
      }
    }
  }
}
