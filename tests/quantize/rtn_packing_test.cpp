// The quantize module's RTN and packing on small matrices whose words are worked out by hand
// here (nibble by nibble, from the layout definitions), its float16 rounding against the
// oracle's, and its refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ninfer/quantize/rtn.hpp"
#include "ninfer/support/error.hpp"
#include "quant_oracle.hpp"
#include "test_support.hpp"

namespace ninfer {
namespace {

QuantizedWeights quantize(const std::vector<float>& w, int64_t rows, int64_t cols, int bits, int64_t group,
                          DType scale = DType::F32) {
  return rtn_quantize(w.data(), rows, cols, group, GridSpec{bits, true, scale}, "test.weight");
}

// Row 0 is 0..7 and row 1 is −7..0: max |w| = 7, so the scale is 1 and q = w. compressed-tensors
// stores q + 8 with element j at bits 4j: 8,9,...,15 -> 0xFEDCBA98 and 1,2,...,8 -> 0x87654321.
TEST(RtnPacking, CompressedTensorsInt4ByHand) {
  const std::vector<float> w = {0, 1, 2, 3, 4, 5, 6, 7, -7, -6, -5, -4, -3, -2, -1, 0};
  const QuantizedWeights m = quantize(w, 2, 8, 4, 8);
  EXPECT_EQ(m.scales, (std::vector<float>{1, 1}));
  EXPECT_EQ(pack_compressed_tensors(m), (std::vector<uint32_t>{0xFEDCBA98u, 0x87654321u}));
}

// Ties go to even: 3.5 -> 4, 2.5 -> 2, -2.5 -> -2, -3.5 -> -4, ±0.5 -> 0, 1.5 -> 2; stored
// C, A, 6, 4, 8, 8, F, A from element 0 up -> 0xAF8846AC.
TEST(RtnPacking, TiesRoundToEven) {
  const std::vector<float> w = {3.5f, 2.5f, -2.5f, -3.5f, 0.5f, -0.5f, 7, 1.5f};
  EXPECT_EQ(pack_compressed_tensors(quantize(w, 1, 8, 4, 8)), (std::vector<uint32_t>{0xAF8846ACu}));
}

// int8: 127, -127, 1, 0 with scale 1, stored + 128: FF, 01, 81, 80 -> 0x808101FF.
TEST(RtnPacking, CompressedTensorsInt8ByHand) {
  const std::vector<float> w = {127, -127, 1, 0};
  EXPECT_EQ(pack_compressed_tensors(quantize(w, 1, 4, 8, 4)), (std::vector<uint32_t>{0x808101FFu}));
}

// GPTQ packs along K into the rows of qweight [K/8, N]: column n holds row n of W. With
// w[n][k] = (k + n) % 8 - 7·(n % 2), column 0 is 0xFEDCBA98, column 2 (1..7 then 0 shifted by
// two: A,B,C,D,E,F,8,9) 0x98FEDCBA, column 1 (-6..0, -7 stored 2..8, 1) 0x18765432. Zero points
// are 8, stored as 7 in every nibble; g_idx is k / group.
TEST(RtnPacking, GptqInt4ByHand) {
  std::vector<float> w(64);
  for (int n = 0; n < 8; ++n)
    for (int k = 0; k < 8; ++k) w[static_cast<size_t>(n * 8 + k)] = static_cast<float>((k + n) % 8 - 7 * (n % 2));
  const QuantizedWeights m = quantize(w, 8, 8, 4, 8);
  const auto q = pack_gptq_qweight(m);
  ASSERT_EQ(q.size(), 8u);
  EXPECT_EQ(q[0], 0xFEDCBA98u);
  EXPECT_EQ(q[1], 0x18765432u);
  EXPECT_EQ(q[2], 0x98FEDCBAu);
  EXPECT_EQ(gptq_qzeros(m), (std::vector<uint32_t>{0x77777777u}));
  EXPECT_EQ(gptq_g_idx(m), (std::vector<int32_t>(8, 0)));
  EXPECT_EQ(gptq_scales(m), (std::vector<float>(8, 1.0f)));
}

// Two groups of four: g_idx 0,0,0,0,1,1,1,1; int8 zero points 128 stored as 127 per byte.
TEST(RtnPacking, GptqInt8GroupsByHand) {
  std::vector<float> w(4 * 8, 0);
  for (int n = 0; n < 4; ++n) {
    w[static_cast<size_t>(n * 8)] = 127;     // group 0: scale 1
    w[static_cast<size_t>(n * 8 + 4)] = 254; // group 1: scale 2
  }
  const QuantizedWeights m = quantize(w, 4, 8, 8, 4);
  EXPECT_EQ(gptq_g_idx(m), (std::vector<int32_t>{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(gptq_qzeros(m), (std::vector<uint32_t>{0x7F7F7F7Fu, 0x7F7F7F7Fu}));
  EXPECT_EQ(gptq_scales(m), (std::vector<float>{1, 1, 1, 1, 2, 2, 2, 2}));
  // Row r of qweight packs k = 4r..4r+3 of each column: 127+128=FF then three 80s.
  EXPECT_EQ(pack_gptq_qweight(m), (std::vector<uint32_t>{0x808080FFu, 0x808080FFu, 0x808080FFu, 0x808080FFu,
                                                          0x808080FFu, 0x808080FFu, 0x808080FFu, 0x808080FFu}));
}

// An all-zero group gets scale 1 and codes 0 (stored 8).
TEST(RtnPacking, AllZeroGroup) {
  const QuantizedWeights m = quantize(std::vector<float>(8, 0.0f), 1, 8, 4, 8, DType::BF16);
  EXPECT_EQ(m.scales, (std::vector<float>{1}));
  EXPECT_EQ(pack_compressed_tensors(m), (std::vector<uint32_t>{0x88888888u}));
}

// max|w| / 7 = 1.49 quanta of float16's subnormal range rounds to 1 quantum, which would put the
// extreme at 10.4 steps; the scale moves up to 2 quanta (2^-23) so it sits within 7.5.
TEST(RtnPacking, SubnormalFloat16ScaleMovesUpUntilTheExtremeFits) {
  const float absmax = static_cast<float>(7 * 1.49 * std::ldexp(1.0, -24));
  const std::vector<float> w = {absmax, -absmax / 2, 0, 0, 0, 0, 0, 0};
  const QuantizedWeights m = quantize(w, 1, 8, 4, 8, DType::F16);
  EXPECT_EQ(m.scales[0], std::ldexp(1.0f, -23));
  for (size_t k = 0; k < w.size(); ++k) EXPECT_LE(std::fabs(m.q[k] * m.scales[0] - w[k]), m.scales[0] / 2) << k;
}

// Asymmetric 4-bit: −1..14 spans 15 steps of 1, so the zero point is 1 and every weight is exact;
// compressed-tensors packs the zero points along N (output n at bits 4n of its group's word).
TEST(RtnPacking, AsymmetricGridByHand) {
  std::vector<float> w(32);
  for (int k = 0; k < 16; ++k) w[static_cast<size_t>(k)] = static_cast<float>(k - 1);       // row 0
  for (int k = 0; k < 16; ++k) w[static_cast<size_t>(16 + k)] = static_cast<float>(2 * k); // row 1: 0..30
  const QuantizedWeights m = rtn_quantize(w.data(), 2, 16, 16, GridSpec{4, false, DType::F32, 0}, "test.weight");
  EXPECT_EQ(m.scales, (std::vector<float>{1, 2}));
  EXPECT_EQ(m.zeros, (std::vector<uint8_t>{1, 0}));
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t k = 0; k < 16; ++k) EXPECT_EQ(m.value(n, k), w[static_cast<size_t>(n * 16 + k)]) << n << ", " << k;
  EXPECT_EQ(pack_compressed_tensors_zeros(m), (std::vector<uint32_t>{0x01u}));
  // GPTQ's checkpoint_format gptq stores zero − 1: a grid for it keeps its zero at 1 or above,
  // widening the scale of row 1 (0..30 over codes 1..15: 30 / 14, rounded up in F32 until 30 fits).
  const QuantizedWeights g = rtn_quantize(w.data(), 2, 16, 16, GridSpec{4, false, DType::F32, 1}, "test.weight");
  EXPECT_EQ(g.zeros, (std::vector<uint8_t>{1, 1}));
  for (int64_t k = 0; k < 16; ++k)
    EXPECT_LE(std::fabs(g.value(1, k) - w[static_cast<size_t>(16 + k)]), 0.5 * g.scales[1]) << k;
}

TEST(RtnPacking, Float16RoundingMatchesTheOracle) {
  auto rng = test::fresh_rng("RtnPacking.Float16RoundingMatchesTheOracle");
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> exp(-30, 17);
  std::vector<float> values = {0.0f, 65504.0f, 65519.0f, 65520.0f, 1e-8f, 2.98e-8f, 2.99e-8f, 6.1035e-5f, 1.0f,
                               std::ldexp(1.0f, -24) * 1.5f, std::ldexp(1.0f, -24) * 2.5f, 1.0f + std::ldexp(1.0f, -11)};
  for (int i = 0; i < 20000; ++i) values.push_back(static_cast<float>(std::ldexp(mant(rng), exp(rng))));
  for (float v : values)
    for (float x : {v, -v}) {
      const double want = test::round_to_format(x, "F16");
      const double got = f16_to_f32(f32_to_f16(x));
      ASSERT_EQ(got, want) << "x = " << x;
    }
}

TEST(RtnPacking, RefusesNonFiniteWeightsNamingTheElement) {
  std::vector<float> w(8, 0.1f);
  w[5] = NAN;
  try {
    quantize(w, 1, 8, 4, 8);
    FAIL() << "a NaN weight was quantized";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test.weight: element [0, 5] is nan"), std::string::npos) << e.what();
  }
}

TEST(RtnPacking, RefusesAScaleFloat16CannotHold) {
  const std::vector<float> w = {1e6f, 0, 0, 0, 0, 0, 0, 0};
  try {
    quantize(w, 1, 8, 4, 8, DType::F16);
    FAIL() << "a scale of 1e6 / 7 was written in float16";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit in F16"), std::string::npos) << e.what();
  }
}

} // namespace
} // namespace ninfer
