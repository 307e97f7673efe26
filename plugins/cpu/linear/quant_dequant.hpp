// Quantized weights on the host: rows of a matrix in the canonical layout
// (ninfer/abi/ops/quant_weight.h) dequantized to float32, which linear and norm_linear then
// multiply with the same kernel as float32 weights. Each weight is the one float32 rounding of
// (u - zero) * scale (of e4m3(u) * scale): exact for F16 and BF16 scales, whose significands
// times a code of at most 9 bits fit float32's 24 bits. So a quantized matrix gives the same
// bits as a float32 checkpoint holding its dequantized weights (tests/models/quant_fixture_test.cpp).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/numerics.hpp"
#include "ninfer/abi/ops/quant_weight.h"
#include "ninfer/abi/plugin_abi.h"

namespace ninfer::cpu_plugin {

// The OCP float8 e4m3fn value of a byte: sign, 4 exponent bits (bias 7), 3 mantissa bits;
// exponent 0 is subnormal (m / 8 * 2^-6); 0x7f / 0xff are NaN; there are no infinities.
inline float e4m3_to_f32(uint8_t b) {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) {
      const int e = (i >> 3) & 15, m = i & 7;
      float v;
      if (e == 15 && m == 7) v = NAN;
      else if (e == 0) v = std::ldexp(static_cast<float>(m), -9);
      else v = std::ldexp(static_cast<float>(8 + m), e - 10);
      t[static_cast<size_t>(i)] = (i & 0x80) ? -v : v;
    }
    return t;
  }();
  return table[b];
}

// Element i of a scale array in F32, BF16 or F16.
inline float scale_f32(const void* scales, int32_t dtype, int64_t i) {
  if (dtype == NINFER_DTYPE_F32) return static_cast<const float*>(scales)[i];
  const uint16_t h = static_cast<const uint16_t*>(scales)[i];
  if (dtype == NINFER_DTYPE_BF16) return bf16_to_f32(h);
  _Float16 f;
  std::memcpy(&f, &h, sizeof f);
  return static_cast<float>(f);
}

// Bytes of one row of codes (quant_weight.h).
inline int64_t quant_row_bytes(int32_t dtype, int64_t k) { return dtype == NINFER_DTYPE_INT4 ? (k + 1) / 2 : k; }

// Groups per row: ceil(K / group_size).
inline int64_t quant_groups(const ninfer_quant_weight& q, int64_t k) { return (k + q.group_size - 1) / q.group_size; }

// Whether the planning shape's dims[3] (linear.h: the codes' layout) is one this plugin reads:
// row-major codes, or tiles of whole 128-column pieces.
inline bool quant_layout_readable(const ninfer_shape* s) {
  return s->dims[3] == NINFER_QUANT_LAYOUT_ROWS ||
         (s->dims[3] == NINFER_QUANT_LAYOUT_TILES16 && s->dims[0] % NINFER_QUANT_TILE_COLS == 0);
}

// Why the description cannot be read (a message for the launch's error), or nullptr: a
// quantized dtype with its wq, a scale dtype, a group size, a layout, and g_idx entries within
// the groups.
inline const char* quant_weight_problem(int32_t dtype, const ninfer_quant_weight* q, int64_t k) {
  if (!ninfer_dtype_is_quantized(dtype)) return nullptr;
  if (!q) return "a quantized weight dtype needs its wq (quant_weight.h), which is NULL";
  if (!q->scales) return "wq->scales is NULL";
  if (q->scale_dtype != NINFER_DTYPE_F32 && q->scale_dtype != NINFER_DTYPE_BF16 && q->scale_dtype != NINFER_DTYPE_F16)
    return "wq->scale_dtype is not F32, BF16 or F16";
  if (q->group_size < 1) return "wq->group_size is below 1";
  if (dtype == NINFER_DTYPE_FP8_E4M3 && q->zeros) return "FP8_E4M3 weights take no zero points";
  if (q->layout != NINFER_QUANT_LAYOUT_ROWS && q->layout != NINFER_QUANT_LAYOUT_TILES16)
    return "wq->layout is not a NINFER_QUANT_LAYOUT_*";
  if (q->layout == NINFER_QUANT_LAYOUT_TILES16 && k % NINFER_QUANT_TILE_COLS != 0)
    return "codes in tiles (wq->layout NINFER_QUANT_LAYOUT_TILES16) need in_features a multiple of 128";
  if (q->g_idx) {
    const int64_t groups = quant_groups(*q, k);
    for (int64_t i = 0; i < k; ++i)
      if (q->g_idx[i] < 0 || q->g_idx[i] >= groups) return "a wq->g_idx entry is outside [0, groups)";
  }
  return nullptr;
}

// Row n (of K columns) of the quantized matrix `codes` as float32 into out[K]. The description
// must have passed quant_weight_problem. A row in tiles is gathered piece by piece first.
inline void dequantize_row(const void* codes, int32_t dtype, const ninfer_quant_weight& q, int64_t k, int64_t n,
                           float* out) {
  const int64_t row_bytes = quant_row_bytes(dtype, k);
  const auto* row = static_cast<const uint8_t*>(codes) + n * row_bytes;
  thread_local std::vector<uint8_t> gathered;
  if (q.layout == NINFER_QUANT_LAYOUT_TILES16) {
    const int64_t piece = quant_row_bytes(dtype, NINFER_QUANT_TILE_COLS);
    gathered.resize(static_cast<size_t>(row_bytes));
    for (int64_t b = 0; b < row_bytes; b += piece)
      std::memcpy(gathered.data() + b,
                  static_cast<const uint8_t*>(codes) + ninfer_quant_tile_offset(n, b, row_bytes, piece),
                  static_cast<size_t>(piece));
    row = gathered.data();
  }
  const int64_t groups = quant_groups(q, k);
  const int32_t symmetric_zero = dtype == NINFER_DTYPE_INT4 ? 8 : 128;
  for (int64_t i = 0; i < k; ++i) {
    const int64_t g = q.g_idx ? q.g_idx[i] : i / q.group_size;
    const float s = scale_f32(q.scales, q.scale_dtype, n * groups + g);
    if (dtype == NINFER_DTYPE_FP8_E4M3) {
      out[i] = e4m3_to_f32(row[i]) * s;
      continue;
    }
    const int32_t u = dtype == NINFER_DTYPE_INT4 ? (row[i / 2] >> (4 * (i % 2))) & 15 : row[i];
    const int32_t z = q.zeros ? q.zeros[n * groups + g] : symmetric_zero;
    out[i] = static_cast<float>(u - z) * s;
  }
}

} // namespace ninfer::cpu_plugin
