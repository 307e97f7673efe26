// BF16 / F16 -> F32 against conversions written here from the formats' definitions (in
// double, with ldexp), exhaustively over all 65,536 bit patterns and through TensorViews of
// fresh random data at unaligned addresses.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "ninfer/checkpoint/checkpoint.hpp"
#include "test_support.hpp"

namespace ninfer {
namespace {

// value = (-1)^s * 2^(e - bias) * (1 + m / 2^mbits), subnormals 2^(1 - bias) * m / 2^mbits.
double decode_binary(uint32_t bits, int ebits, int mbits) {
  const uint32_t s = bits >> (ebits + mbits);
  const uint32_t e = (bits >> mbits) & ((1u << ebits) - 1);
  const uint32_t m = bits & ((1u << mbits) - 1);
  const int bias = (1 << (ebits - 1)) - 1;
  double v;
  if (e == (1u << ebits) - 1) v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (e == 0) v = std::ldexp(static_cast<double>(m), 1 - bias - mbits);
  else v = std::ldexp(static_cast<double>(m + (1u << mbits)), static_cast<int>(e) - bias - mbits);
  return s ? -v : v;
}
double decode_f16(uint16_t h) { return decode_binary(h, 5, 10); }
double decode_bf16(uint16_t b) { return decode_binary(b, 8, 7); }

void expect_same(float got, double want, uint32_t pattern) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << std::hex << pattern;
  } else {
    EXPECT_EQ(static_cast<double>(got), want) << std::hex << pattern;
    EXPECT_EQ(std::signbit(got), std::signbit(want)) << std::hex << pattern;
  }
}

TEST(CheckpointDType, F16AllBitPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) expect_same(f16_to_f32(static_cast<uint16_t>(h)), decode_f16(h), h);
}

TEST(CheckpointDType, BF16AllBitPatterns) {
  for (uint32_t b = 0; b < 65536; ++b) expect_same(bf16_to_f32(static_cast<uint16_t>(b)), decode_bf16(b), b);
}

// A TensorView over random bytes at an odd address (safetensors promises no alignment).
struct RandomTensor {
  std::vector<unsigned char> storage;
  TensorView view;
  RandomTensor(DType dt, int64_t n, std::mt19937_64& rng) {
    const size_t bytes = static_cast<size_t>(n) * dtype_size(dt);
    storage.resize(bytes + 1);
    for (auto& c : storage) c = static_cast<unsigned char>(rng());
    view.name = "random";
    view.dtype = dt;
    view.shape = {n};
    view.data = storage.data() + 1;
    view.bytes = bytes;
  }
  uint16_t half(int64_t i) const {
    return static_cast<uint16_t>(storage[1 + 2 * i] | (storage[2 + 2 * i] << 8)); // little-endian
  }
};

TEST(CheckpointDType, ToF32OfRandomTensors) {
  auto rng = test::fresh_rng("dtype to_f32");
  const int64_t n = 4097;
  for (DType dt : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(dt));
    RandomTensor t(dt, n, rng);
    const std::vector<float> all = to_f32(t.view);
    ASSERT_EQ(all.size(), static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t bits = t.half(i);
      expect_same(all[i], dt == DType::BF16 ? decode_bf16(bits) : decode_f16(bits), bits);
    }
    // A sub-range equals the same elements of the whole conversion.
    std::uniform_int_distribution<int64_t> pick(0, n - 1);
    const int64_t first = pick(rng);
    const int64_t count = std::uniform_int_distribution<int64_t>(0, n - first)(rng);
    std::vector<float> part(static_cast<size_t>(count));
    to_f32(t.view, first, count, part.data());
    for (int64_t i = 0; i < count; ++i)
      EXPECT_EQ(std::bit_cast<uint32_t>(part[i]), std::bit_cast<uint32_t>(all[first + i])) << first + i;
  }
  RandomTensor f(DType::F32, n, rng);
  const std::vector<float> got = to_f32(f.view);
  EXPECT_EQ(std::memcmp(got.data(), f.storage.data() + 1, f.view.bytes), 0);
}

TEST(CheckpointDType, RangeOutsideTheTensorIsAnError) {
  auto rng = test::fresh_rng("dtype range");
  RandomTensor t(DType::F16, 8, rng);
  float out[16];
  EXPECT_THROW(to_f32(t.view, 4, 5, out), std::exception);
  EXPECT_THROW(to_f32(t.view, -1, 2, out), std::exception);
}

// f32 -> bf16 must pick the nearest bf16 (ties to even), checked against the two candidates'
// exact values in double.
TEST(CheckpointDType, F32ToBf16RoundsToNearestEven) {
  auto rng = test::fresh_rng("f32_to_bf16");
  std::uniform_int_distribution<uint32_t> bits_dist;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = bits_dist(rng);
    if (i % 4 == 0) u = (u & 0xffff0000u) | 0x8000u; // exact ties
    const float f = std::bit_cast<float>(u);
    const uint16_t got = f32_to_bf16(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(got)));
      continue;
    }
    const uint16_t lo = static_cast<uint16_t>(u >> 16), hi = static_cast<uint16_t>(lo + 1);
    uint16_t want = lo;
    if (!std::isinf(f)) {
      // IEEE rounds as if the exponent were unbounded: the candidate past the largest
      // finite bf16 counts as 2^128 (and rounds to infinity).
      auto value = [](uint16_t b) {
        const double d = decode_bf16(b);
        return std::isinf(d) ? std::copysign(std::ldexp(1.0, 128), d) : d;
      };
      const double x = f, elo = std::fabs(x - value(lo)), ehi = std::fabs(value(hi) - x);
      want = elo < ehi ? lo : ehi < elo ? hi : ((lo & 1) ? hi : lo);
    }
    EXPECT_EQ(got, want) << std::hex << u;
  }
}

} // namespace
} // namespace ninfer
