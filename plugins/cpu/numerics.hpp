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

inline double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }
inline double silu(double z) { return z / (1.0 + std::exp(-z)); }

} // namespace ninfer::cpu_plugin
