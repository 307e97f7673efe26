// A random quantized matrix in the canonical layout (ninfer/abi/ops/quant_weight.h) on the
// host, and its dequantized weights in float64 written from the contract's definition (bit
// fields decoded with ldexp, not with the plugin's or the loader's code): shared by the CPU op
// tests and the checkpoint tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ninfer/abi/ops/quant_weight.h"
#include "ninfer/abi/plugin_abi.h"
#include "test_support.hpp"

namespace ninfer::test {

// value = (-1)^s * 2^(e - bias) * (1 + m / 2^mbits); e = 0: 2^(1 - bias) * m / 2^mbits.
// `nan_all_ones`: e4m3fn has no infinities; only all-ones exponent and mantissa is NaN.
inline double decode_float_bits(uint32_t bits, int ebits, int mbits, bool e4m3fn = false) {
  const uint32_t s = bits >> (ebits + mbits);
  const uint32_t e = (bits >> mbits) & ((1u << ebits) - 1);
  const uint32_t m = bits & ((1u << mbits) - 1);
  const int bias = (1 << (ebits - 1)) - 1;
  double v;
  if (e4m3fn && e == (1u << ebits) - 1 && m == (1u << mbits) - 1) v = std::numeric_limits<double>::quiet_NaN();
  else if (!e4m3fn && e == (1u << ebits) - 1) v = m ? std::numeric_limits<double>::quiet_NaN() : INFINITY;
  else if (e == 0) v = std::ldexp(static_cast<double>(m), 1 - bias - mbits);
  else v = std::ldexp(static_cast<double>(m + (1u << mbits)), static_cast<int>(e) - bias - mbits);
  return s ? -v : v;
}
inline double decode_e4m3(uint8_t b) { return decode_float_bits(b, 4, 3, true); }

// A scale array element in F32 / BF16 / F16, stored little-endian in raw bytes.
inline double decode_scale(const std::vector<uint8_t>& raw, int32_t dtype, size_t i) {
  if (dtype == NINFER_DTYPE_F32) {
    float f;
    std::memcpy(&f, &raw[i * 4], 4);
    return f;
  }
  const uint16_t h = static_cast<uint16_t>(raw[i * 2] | (raw[i * 2 + 1] << 8));
  return dtype == NINFER_DTYPE_BF16 ? decode_float_bits(h, 8, 7) : decode_float_bits(h, 5, 10);
}

// A positive scale in [lo, hi) stored in `dtype`, appended to raw.
inline void push_scale(std::vector<uint8_t>& raw, int32_t dtype, std::mt19937_64& rng, double lo = 0.004,
                       double hi = 0.05) {
  const float v = static_cast<float>(std::uniform_real_distribution<double>(lo, hi)(rng));
  if (dtype == NINFER_DTYPE_F32) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    raw.insert(raw.end(), p, p + 4);
    return;
  }
  uint16_t h;
  if (dtype == NINFER_DTYPE_BF16) {
    h = to_bf16(v);
  } else {
    const _Float16 f = static_cast<_Float16>(v);
    std::memcpy(&h, &f, 2);
  }
  raw.push_back(static_cast<uint8_t>(h & 0xff));
  raw.push_back(static_cast<uint8_t>(h >> 8));
}

inline const char* scale_dtype_name(int32_t d) {
  return d == NINFER_DTYPE_F32 ? "f32" : d == NINFER_DTYPE_BF16 ? "bf16" : "f16";
}

struct QuantWeightCase {
  int32_t dtype = NINFER_DTYPE_INT4; // INT4, INT8, FP8_E4M3
  int32_t N = 0, K = 0, group = 0, scale_dtype = NINFER_DTYPE_F16;
  std::vector<uint8_t> codes, scales, zeros; // zeros empty: symmetric
  std::vector<int32_t> g_idx;                // empty: k / group

  int32_t groups() const { return (K + group - 1) / group; }
  int64_t row_bytes() const { return dtype == NINFER_DTYPE_INT4 ? (K + 1) / 2 : K; }
  int32_t bits() const { return dtype == NINFER_DTYPE_INT4 ? 4 : 8; }
  ninfer_quant_weight wq() const {
    return {scales.data(), zeros.empty() ? nullptr : zeros.data(), g_idx.empty() ? nullptr : g_idx.data(),
            scale_dtype, group};
  }
  std::string describe() const {
    return std::string(ninfer_dtype_name(dtype)) + " " + std::to_string(N) + "x" + std::to_string(K) + " g" +
           std::to_string(group) + " " + scale_dtype_name(scale_dtype) + (zeros.empty() ? " sym" : " zeros") +
           (g_idx.empty() ? "" : " g_idx");
  }

  // The code of (n, k) as the layout stores it.
  uint32_t code(int32_t n, int32_t k) const {
    const uint8_t b = codes[static_cast<size_t>(n * row_bytes() + (dtype == NINFER_DTYPE_INT4 ? k / 2 : k))];
    return dtype == NINFER_DTYPE_INT4 ? (k % 2 ? b >> 4 : b & 15u) : b;
  }
  // The codes in NINFER_QUANT_LAYOUT_TILES16 (N % 16 == 0, K % 128 == 0), code by code from the
  // contract's formula: column k of row n is in piece s = k / 128 of its band, whose 16 rows'
  // pieces of step s lie side by side.
  std::vector<uint8_t> tiled_codes() const {
    const int64_t piece = dtype == NINFER_DTYPE_INT4 ? 64 : 128;
    std::vector<uint8_t> t(codes.size(), 0);
    for (int32_t n = 0; n < N; ++n)
      for (int32_t k = 0; k < K; ++k) {
        const int64_t at = static_cast<int64_t>(n / 16) * 16 * row_bytes() + static_cast<int64_t>(k / 128) * 16 * piece +
                           (n % 16) * piece + (dtype == NINFER_DTYPE_INT4 ? (k % 128) / 2 : k % 128);
        const uint32_t u = code(n, k);
        uint8_t& b = t[static_cast<size_t>(at)];
        b = static_cast<uint8_t>(dtype == NINFER_DTYPE_INT4 ? (b | (u << (4 * (k % 2)))) : u);
      }
    return t;
  }
  ninfer_quant_weight wq_tiled() const {
    ninfer_quant_weight q = wq();
    q.layout = NINFER_QUANT_LAYOUT_TILES16;
    return q;
  }
  // W[n, k] from the contract, in float64.
  double weight(int32_t n, int32_t k) const {
    const int32_t g = g_idx.empty() ? k / group : g_idx[static_cast<size_t>(k)];
    const double s = decode_scale(scales, scale_dtype, static_cast<size_t>(n) * groups() + g);
    if (dtype == NINFER_DTYPE_FP8_E4M3) return decode_e4m3(static_cast<uint8_t>(code(n, k))) * s;
    const double z = zeros.empty() ? std::ldexp(1.0, bits() - 1) : zeros[static_cast<size_t>(n) * groups() + g];
    return (double(code(n, k)) - z) * s;
  }
  std::vector<double> dequantized() const {
    std::vector<double> w(static_cast<size_t>(N) * K);
    for (int32_t n = 0; n < N; ++n)
      for (int32_t k = 0; k < K; ++k) w[static_cast<size_t>(n) * K + k] = weight(n, k);
    return w;
  }

  static QuantWeightCase random(std::mt19937_64& rng, int32_t dtype, int32_t N, int32_t K, int32_t group,
                                int32_t scale_dtype, bool with_zeros, bool with_g_idx) {
    QuantWeightCase c;
    c.dtype = dtype;
    c.N = N;
    c.K = K;
    c.group = group;
    c.scale_dtype = scale_dtype;
    c.codes.assign(static_cast<size_t>(N * c.row_bytes()), 0);
    std::uniform_int_distribution<int> byte(0, 255);
    for (int32_t n = 0; n < N; ++n)
      for (int32_t k = 0; k < K; ++k) {
        uint32_t u = static_cast<uint32_t>(byte(rng));
        if (dtype == NINFER_DTYPE_INT4) u &= 15u;
        // e4m3fn NaN (0x7f, 0xff) is not a weight: draw its neighbour instead.
        if (dtype == NINFER_DTYPE_FP8_E4M3 && (u & 0x7f) == 0x7f) u -= 1;
        uint8_t& b = c.codes[static_cast<size_t>(n * c.row_bytes() + (dtype == NINFER_DTYPE_INT4 ? k / 2 : k))];
        b = static_cast<uint8_t>(dtype == NINFER_DTYPE_INT4 ? (b | (u << (4 * (k % 2)))) : u);
      }
    // FP8 codes reach 448: smaller scales keep the products like the integer ones'.
    const double lo = dtype == NINFER_DTYPE_FP8_E4M3 ? 1e-4 : 0.004, hi = dtype == NINFER_DTYPE_FP8_E4M3 ? 2e-3 : 0.05;
    for (int32_t i = 0; i < N * c.groups(); ++i) push_scale(c.scales, scale_dtype, rng, lo, hi);
    if (with_zeros) {
      // Any code, and 2^bits for INT4 (GPTQ v1's wrapped zero reads back so).
      std::uniform_int_distribution<int> z(0, dtype == NINFER_DTYPE_INT4 ? 16 : 255);
      c.zeros.resize(static_cast<size_t>(N) * c.groups());
      for (auto& v : c.zeros) v = static_cast<uint8_t>(z(rng));
    }
    if (with_g_idx) {
      // A desc_act map: every group keeps its size, the channels shuffled among them.
      c.g_idx.resize(static_cast<size_t>(K));
      for (int32_t k = 0; k < K; ++k) c.g_idx[static_cast<size_t>(k)] = k / group;
      std::shuffle(c.g_idx.begin(), c.g_idx.end(), rng);
    }
    return c;
  }
};

} // namespace ninfer::test
