// Element types of checkpoint tensors and their conversion to float32.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

const char* dtype_name(DType d) {
  switch (d) {
    case DType::F32: return "F32";
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::F8_E4M3: return "F8_E4M3";
  }
  return "?";
}

size_t dtype_size(DType d) {
  switch (d) {
    case DType::F32:
    case DType::I32: return 4;
    case DType::BF16:
    case DType::F16: return 2;
    case DType::I64: return 8;
    case DType::F8_E4M3: return 1;
  }
  return 0;
}

const char* readable_dtypes() { return "F32, BF16, F16, I32, I64, F8_E4M3"; }

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_string(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

float bf16_to_f32(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  return std::bit_cast<float>(u);
}

uint16_t f32_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u); // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1fu) {
    bits = sign | 0x7f800000u | (mant << 13); // Inf / NaN (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13); // rebias 15 -> 127
  } else if (mant == 0) {
    bits = sign; // signed zero
  } else {
    // Subnormal half: normalise the mantissa into a float32 normal.
    int e = -1;
    do {
      mant <<= 1;
      ++e;
    } while ((mant & 0x400u) == 0);
    bits = sign | ((112u - static_cast<uint32_t>(e)) << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

float e4m3_to_f32(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  float v;
  if (e == 15 && m == 7) v = std::numeric_limits<float>::quiet_NaN();
  else if (e == 0) v = std::ldexp(static_cast<float>(m), -9);       // subnormal: m/8 * 2^-6
  else v = std::ldexp(static_cast<float>(8 + m), e - 10);          // (1 + m/8) * 2^(e-7)
  return (b & 0x80) ? -v : v;
}

void to_f32(const TensorView& t, int64_t first, int64_t count, float* out) {
  if (first < 0 || count < 0 || first + count > t.numel())
    throw Error(fmt::format("tensor {}: elements [{}, {}) are outside its {} elements", t.name, first,
                            first + count, t.numel()));
  const auto* base = static_cast<const unsigned char*>(t.data);
  switch (t.dtype) {
    case DType::F32:
      std::memcpy(out, base + first * 4, static_cast<size_t>(count) * 4);
      return;
    case DType::BF16:
    case DType::F16: {
      const bool bf = t.dtype == DType::BF16;
      const unsigned char* p = base + first * 2;
      for (int64_t i = 0; i < count; ++i) {
        uint16_t v;
        std::memcpy(&v, p + i * 2, 2);
        out[i] = bf ? bf16_to_f32(v) : f16_to_f32(v);
      }
      return;
    }
    case DType::F8_E4M3: {
      const unsigned char* p = base + first;
      for (int64_t i = 0; i < count; ++i) out[i] = e4m3_to_f32(p[i]);
      return;
    }
    case DType::I32:
    case DType::I64:
      throw Error(fmt::format("{}: tensor {} holds {} integers where float values are expected (a quantized "
                              "checkpoint's packed tensor under a plain weight's name?)",
                              t.file.string(), t.name, dtype_name(t.dtype)));
  }
}

void to_f32(const TensorView& t, float* out) { to_f32(t, 0, t.numel(), out); }

std::vector<float> to_f32(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  to_f32(t, out.data());
  return out;
}

} // namespace ninfer
