// The KV cache on the host: the one address rule (the head row index of kv_append.h) and the
// compact formats' quantization (write) and dequantization (read), each exactly as kv_append.h
// words it, in float32 where the contract says float32.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ninfer/abi/ops/kv_append.h"
#include "ninfer/abi/plugin_abi.h"

namespace ninfer::cpu_plugin {

// The head row of (slot, pos, kv head) in `c`, through the slot's block table: elements start at
// row * head_dim, a compact format's scales at row * groups; -1 when the slot, the position or
// its table entry lies outside the cache. Every CPU op addresses the cache through this function.
inline int64_t kv_row(const ninfer_kv_cache& c, int32_t slot, int32_t pos, int32_t head) {
  const int64_t at = ninfer_kv_cache_row(&c, slot, pos);
  return at < 0 ? -1 : at / c.head_dim + head;
}

inline uint16_t f16_bits(float x) {
  const _Float16 h = static_cast<_Float16>(x);
  uint16_t b;
  std::memcpy(&b, &h, sizeof b);
  return b;
}
inline float f16_value(uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, sizeof h);
  return static_cast<float>(h);
}

// The e4m3fn code of x rounded to nearest even, saturated to +-448 (satfinite); NaN -> 0x7f.
inline uint8_t e4m3_satfinite(float x) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const float a = std::fabs(x);
  if (a >= 448.f) return sign | 0x7e;
  int e;
  std::frexp(a, &e);                           // a = m 2^e, m in [0.5, 1): leading bit 2^(e-1)
  const int lead = std::max(e - 1, -6);        // below 2^-6 the quantum stays 2^-9 (subnormals)
  const float quantum = std::ldexp(1.f, lead - 3);
  const float r = std::nearbyint(a / quantum) * quantum; // exact scaling by a power of two
  if (r == 0.f) return sign;
  std::frexp(r, &e);
  const int er = e - 1;
  if (er < -6) return sign | static_cast<uint8_t>(std::ldexp(r, 9));                 // subnormal: m 2^-9
  const int m = static_cast<int>(std::ldexp(r, 3 - er)) - 8;                           // 8 + m = r / 2^(er-3)
  return sign | static_cast<uint8_t>(((er + 7) << 3) | m);
}

inline float e4m3_value(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  float v;
  if (e == 15 && m == 7) v = NAN;
  else if (e == 0) v = std::ldexp(static_cast<float>(m), -9);
  else v = std::ldexp(static_cast<float>(8 + m), e - 10);
  return (b & 0x80) ? -v : v;
}

// x <- H x with H the normalized Hadamard matrix of order n (a power of two): the butterflies
// of the fast Walsh-Hadamard transform, then the 1/sqrt(n) factor. T is float for the cache's
// keys (float32, as the contract says) and double for attention's rotated query.
template <class T>
void hadamard_rotate(T* x, int32_t n) {
  for (int32_t len = 1; len < n; len <<= 1)
    for (int32_t i = 0; i < n; i += len << 1)
      for (int32_t j = i; j < i + len; ++j) {
        const T a = x[j], b = x[j + len];
        x[j] = a + b;
        x[j + len] = a - b;
      }
  const T f = static_cast<T>(1.0 / std::sqrt(static_cast<double>(n)));
  for (int32_t i = 0; i < n; ++i) x[i] *= f;
}

constexpr uint16_t kF16Nan = 0x7e00;
// The scale candidates kv_append.h's least-error search tries (KV_FP8 per row, KV_INT4R per group).
constexpr int32_t kFp8ScaleCandidates = NINFER_KV_FP8_SCALE_CANDIDATES;
constexpr int32_t kInt4ScaleCandidates = NINFER_KV_INT4_SCALE_CANDIDATES;

// The squared error of a candidate scale, summed as kv_append.h orders it (the CUDA writer's
// warp does the same): element d's float32 error e = decoded - y goes, squared in double (exact),
// into lane d % 32's partial in increasing d; the 32 partials meet in an xor butterfly.
class LaneErrors {
 public:
  void add(int32_t d, float decoded, float y) {
    const double e = static_cast<double>(decoded - y);
    lane_[d % 32] += e * e;
  }
  double total() {
    for (int32_t off = 16; off > 0; off >>= 1) {
      double next[32];
      for (int32_t l = 0; l < 32; ++l) next[l] = lane_[l] + lane_[l ^ off];
      std::copy(next, next + 32, lane_);
    }
    return lane_[0];
  }

 private:
  double lane_[32] = {};
};

// The largest |y| of y[0, n) into `a`; whether every element is finite.
inline bool absmax_finite(const float* y, int32_t n, float& a) {
  a = 0;
  bool finite = true;
  for (int32_t d = 0; d < n; ++d) {
    finite = finite && std::isfinite(y[d]);
    a = std::max(a, std::fabs(y[d]));
  }
  return finite;
}

// Of `count` candidate scales candidate(i), the first whose squared error over y[d0, d0 + n) is
// the least (kv_append.h's sum, LaneErrors); decoded(y_d, c) is the float32 value element y_d
// reads as under scale c. d0 is a multiple of 32.
template <class Candidate, class Decoded>
float least_error_scale(int32_t count, const float* y, int32_t d0, int32_t n, Candidate candidate, Decoded decoded) {
  float s = 0;
  double best = INFINITY;
  for (int32_t i = 0; i < count; ++i) {
    const float c = candidate(i);
    LaneErrors err;
    for (int32_t d = d0; d < d0 + n; ++d) err.add(d, decoded(y[d], c), y[d]);
    if (const double e = err.total(); e < best) {
      best = e;
      s = c;
    }
  }
  return s;
}

// KV_INT8: codes q in [-127, 127] and fp16 scales fp16(absmax / 127) of one row y[hd] in groups
// of NINFER_KV_GROUP; put(d, q) stores element d's code.
template <class Put>
void quantize_int8_groups(const float* y, int32_t hd, uint16_t* scales, Put put) {
  for (int32_t g0 = 0; g0 < hd; g0 += NINFER_KV_GROUP) {
    float a;
    const bool finite = absmax_finite(y + g0, NINFER_KV_GROUP, a);
    const float s = f16_value(f16_bits(a / 127.f));
    const bool ok = finite && std::isfinite(s);
    scales[g0 / NINFER_KV_GROUP] = ok ? f16_bits(s) : kF16Nan;
    for (int32_t d = g0; d < g0 + NINFER_KV_GROUP; ++d)
      put(d, ok && s > 0 ? static_cast<int32_t>(std::clamp(std::nearbyint(y[d] / s), -127.f, 127.f)) : 0);
  }
}

// KV_INT4R's code of y under scale s: rint(y / s) clamped to [-8, 7]; 0 when s is 0.
inline int32_t int4_code(float y, float s) {
  return s > 0 ? static_cast<int32_t>(std::clamp(std::nearbyint(y / s), -8.f, 7.f)) : 0;
}

// KV_INT4R: per group of NINFER_KV_GROUP, the scale of least squared error among
// fp16(absmax / (7 + i/4)), i = 0..4 (kv_append.h), and its codes; put(d, q) stores them.
template <class Put>
void quantize_int4_groups(const float* y, int32_t hd, uint16_t* scales, Put put) {
  for (int32_t g0 = 0; g0 < hd; g0 += NINFER_KV_GROUP) {
    float a;
    const bool finite = absmax_finite(y + g0, NINFER_KV_GROUP, a);
    float s = f16_value(f16_bits(a / 7.f));
    const bool ok = finite && std::isfinite(s);
    if (ok && s > 0)
      s = least_error_scale(
          kInt4ScaleCandidates, y, g0, NINFER_KV_GROUP,
          [&](int32_t i) { return f16_value(f16_bits(a / (7.f + 0.25f * static_cast<float>(i)))); },
          [](float x, float c) { return static_cast<float>(int4_code(x, c)) * c; });
    scales[g0 / NINFER_KV_GROUP] = ok ? f16_bits(s) : kF16Nan;
    for (int32_t d = g0; d < g0 + NINFER_KV_GROUP; ++d) put(d, ok ? int4_code(y[d], s) : 0);
  }
}

// KV_FP8: the row scale of least squared error among absmax / (448 - 14 i), i = 0..15
// (kv_append.h), NaN for a row with a non-finite element; codes[d] its e4m3 codes.
inline float quantize_fp8_row(const float* x, int32_t hd, uint8_t* codes) {
  float a;
  const bool finite = absmax_finite(x, hd, a);
  if (!finite || a == 0.f) {
    std::fill(codes, codes + hd, uint8_t{0});
    return finite ? 0.f : NAN;
  }
  const float s = least_error_scale(
      kFp8ScaleCandidates, x, 0, hd, [&](int32_t i) { return a / (448.f - 14.f * static_cast<float>(i)); },
      [](float y, float c) { return e4m3_value(e4m3_satfinite(y / c)) * c; });
  for (int32_t d = 0; d < hd; ++d) codes[d] = e4m3_satfinite(x[d] / s);
  return s;
}

// Writes the float32 head row x[hd] as row `row` of one tensor (codes, scales) of a cache of
// `dtype`; `key` selects KV_INT4R's rotation. F32/F16/BF16 are kv_append's own business.
inline void kv_quantize_row(int32_t dtype, bool key, const float* x, int32_t hd, void* codes, void* scales,
                            int64_t row) {
  switch (dtype) {
    case NINFER_DTYPE_KV_INT8: {
      auto* c = static_cast<int8_t*>(codes) + row * hd;
      quantize_int8_groups(x, hd, static_cast<uint16_t*>(scales) + row * (hd / NINFER_KV_GROUP),
                           [&](int32_t d, int32_t q) { c[d] = static_cast<int8_t>(q); });
      return;
    }
    case NINFER_DTYPE_KV_FP8:
      static_cast<float*>(scales)[row] = quantize_fp8_row(x, hd, static_cast<uint8_t*>(codes) + row * hd);
      return;
    case NINFER_DTYPE_KV_INT4R: {
      float y[512];
      std::copy(x, x + hd, y);
      if (key) hadamard_rotate(y, hd);
      auto* c = static_cast<uint8_t*>(codes) + row * hd / 2;
      quantize_int4_groups(y, hd, static_cast<uint16_t*>(scales) + row * (hd / NINFER_KV_GROUP), [&](int32_t d, int32_t q) {
        const auto nib = static_cast<uint8_t>(q + 8);
        c[d / 2] = (d & 1) ? static_cast<uint8_t>((c[d / 2] & 0x0f) | (nib << 4))
                           : static_cast<uint8_t>((c[d / 2] & 0xf0) | nib);
      });
      return;
    }
  }
}

// Row `row` of one tensor of a compact cache as the float32 values its codes represent:
// q * s, e4m3(e) * s. KV_INT4R keys come out still rotated (k' of kv_append.h).
inline void kv_dequantize_row(int32_t dtype, const void* codes, const void* scales, int64_t row, int32_t hd,
                              float* out) {
  switch (dtype) {
    case NINFER_DTYPE_KV_INT8: {
      const auto* c = static_cast<const int8_t*>(codes) + row * hd;
      const auto* s = static_cast<const uint16_t*>(scales) + row * (hd / NINFER_KV_GROUP);
      for (int32_t d = 0; d < hd; ++d) out[d] = static_cast<float>(c[d]) * f16_value(s[d / NINFER_KV_GROUP]);
      return;
    }
    case NINFER_DTYPE_KV_FP8: {
      const auto* c = static_cast<const uint8_t*>(codes) + row * hd;
      const float s = static_cast<const float*>(scales)[row];
      for (int32_t d = 0; d < hd; ++d) out[d] = e4m3_value(c[d]) * s;
      return;
    }
    case NINFER_DTYPE_KV_INT4R: {
      const auto* c = static_cast<const uint8_t*>(codes) + row * hd / 2;
      const auto* s = static_cast<const uint16_t*>(scales) + row * (hd / NINFER_KV_GROUP);
      for (int32_t d = 0; d < hd; ++d) {
        const int32_t nib = (d & 1) ? c[d / 2] >> 4 : c[d / 2] & 0x0f;
        out[d] = static_cast<float>(nib - 8) * f16_value(s[d / NINFER_KV_GROUP]);
      }
      return;
    }
  }
}

} // namespace ninfer::cpu_plugin
