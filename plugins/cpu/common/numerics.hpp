// Scalar numerics of the CPU reference plugin. Everything a GPU variant will be compared with
// is evaluated here in double where that is cheap, so the reference's own rounding stays far
// below the tolerances tests use.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "ninfer/abi/plugin_abi.h"

namespace ninfer::cpu_plugin {

// bfloat16 is the high half of a float32: widening is exact.
inline float bf16_to_f32(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Element i of a weight tensor stored as F32 or BF16.
inline float load_weight(const void* base, int64_t i, int32_t dtype) {
  if (dtype == NINFER_DTYPE_F32) return static_cast<const float*>(base)[i];
  return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
}

// x rounded to the nearest bfloat16 (ties to even), as a float: what a GPU variant that feeds
// bf16 tensor cores does to its float32 inputs (emulation variants, docs/models.md).
inline float round_to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return x; // NaN stays NaN
  bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  float r;
  std::memcpy(&r, &bits, sizeof r);
  return r;
}

// x rounded to the nearest IEEE half (ties to even), as a float: the compiler's _Float16
// conversion (infinite beyond 65504, subnormal below 2^-14). The emulated attention rounds
// every key element once per query row, so this must be cheap.
inline float round_to_f16(float x) { return static_cast<float>(static_cast<_Float16>(x)); }

// The element types of a KV cache (ninfer/abi/ops/kv_append.h): float, IEEE half, bfloat16.
// store() rounds a float32 to nearest even, load() widens exactly. Attention and kv_append are
// templates over these, so the inner loops see one concrete type.
struct KvF32 {
  using T = float;
  static T store(float x) { return x; }
  static float load(T x) { return x; }
};
struct KvF16 {
  using T = _Float16;
  static T store(float x) { return static_cast<_Float16>(x); }
  static float load(T x) { return static_cast<float>(x); }
};
struct KvBf16 {
  using T = uint16_t; // the high half of the rounded float32
  static T store(float x) {
    if (std::isnan(x)) return 0x7fc0; // a quiet NaN (truncating a low-payload NaN would give infinity)
    const float r = round_to_bf16(x);
    uint32_t bits;
    std::memcpy(&bits, &r, sizeof bits);
    return static_cast<uint16_t>(bits >> 16);
  }
  static float load(T x) { return bf16_to_f32(x); }
};

inline double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }
inline double silu(double z) { return z / (1.0 + std::exp(-z)); }

} // namespace ninfer::cpu_plugin
