#include "ninfer/quantize/quant_grid.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ninfer {

int symmetric_qmax(int bits) { return (1 << (bits - 1)) - 1; }

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u));
  const int exp = static_cast<int>(abs >> 23) - 127;
  if (exp > 15) return static_cast<uint16_t>(sign | 0x7c00u);
  uint32_t mant = (abs & 0x7fffffu) | 0x800000u; // 24 significant bits
  int shift;                                     // bits of mant dropped
  uint32_t biased;
  if (exp >= -14) {
    shift = 13;
    biased = static_cast<uint32_t>(exp + 15);
  } else {
    shift = 13 + (-14 - exp); // subnormal: fewer bits remain
    if (shift > 24) return sign;
    biased = 0;
  }
  uint32_t kept = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1u))) ++kept;
  // A normal's implicit bit sits at bit 10 of kept; a carry out of the mantissa moves the
  // exponent up, which adding the fields below does on its own.
  uint32_t h = biased == 0 ? kept : ((biased << 10) + (kept - 0x400u));
  if (h >= 0x7c00u) h = 0x7c00u;
  return static_cast<uint16_t>(sign | h);
}

float round_to_scale_dtype(float v, DType d) {
  switch (d) {
    case DType::BF16: return bf16_to_f32(f32_to_bf16(v));
    case DType::F16: return f16_to_f32(f32_to_f16(v));
    default: break; // F32; scales are only ever float (plan_module refuses other weights)
  }
  return v;
}

namespace {

// The next value above positive `v` that `d` represents.
float next_up(float v, DType d) {
  switch (d) {
    case DType::BF16: return bf16_to_f32(static_cast<uint16_t>(f32_to_bf16(v) + 1));
    case DType::F16: return f16_to_f32(static_cast<uint16_t>(f32_to_f16(v) + 1));
    default: break;
  }
  return std::nextafter(v, INFINITY);
}

std::string too_large(double span, float s, const GridSpec& spec) {
  return fmt::format("spans {}, whose scale near {} does not fit in {} (largest 65504)", span, s,
                     dtype_name(spec.scale_dtype));
}

std::string symmetric_grid(double lo, double hi, const GridSpec& spec, GroupGrid& g) {
  const int qmax = symmetric_qmax(spec.bits);
  const double absmax = std::max(std::fabs(lo), std::fabs(hi));
  g.zero = 1 << (spec.bits - 1);
  g.scale = 1.0f;
  if (absmax == 0) return {};
  float s = round_to_scale_dtype(static_cast<float>(absmax) / static_cast<float>(qmax), spec.scale_dtype);
  // Rounding the scale down (or into a subnormal) may push the extreme past qmax + 1/2, where
  // the clamp would cost more than half a step.
  while (std::isfinite(s) && (s == 0 || absmax / s > qmax + 0.5)) s = next_up(s, spec.scale_dtype);
  if (!std::isfinite(s)) return too_large(absmax, static_cast<float>(absmax) / static_cast<float>(qmax), spec);
  g.scale = s;
  return {};
}

std::string asymmetric_grid(double lo, double hi, const GridSpec& spec, GroupGrid& g) {
  const int maxq = (1 << spec.bits) - 1;
  lo = std::min(lo, 0.0);
  hi = std::max(hi, 0.0);
  g.scale = 1.0f;
  g.zero = spec.min_zero;
  if (hi == lo) return {};
  const float first = static_cast<float>(hi - lo) / static_cast<float>(maxq);
  float s = round_to_scale_dtype(first, spec.scale_dtype);
  if (s > 0 && std::nearbyint(-lo / s) < spec.min_zero) // the grid's bottom code cannot be used:
    s = round_to_scale_dtype(static_cast<float>(hi) / static_cast<float>(maxq - spec.min_zero), spec.scale_dtype);
  for (;;) {
    if (!std::isfinite(s)) return too_large(hi - lo, first, spec);
    if (s > 0) {
      const int z = static_cast<int>(std::clamp(std::nearbyint(-lo / s), double(spec.min_zero), double(maxq)));
      if (-lo <= (z + 0.5) * s && hi <= (maxq - z + 0.5) * s) {
        g.scale = s;
        g.zero = z;
        return {};
      }
    }
    s = next_up(s, spec.scale_dtype);
  }
}

} // namespace

std::string choose_grid(double lo, double hi, const GridSpec& spec, GroupGrid& grid) {
  return spec.symmetric ? symmetric_grid(lo, hi, spec, grid) : asymmetric_grid(lo, hi, spec, grid);
}

int grid_code(double w, const GroupGrid& grid, const GridSpec& spec) {
  const double r = std::nearbyint(w / grid.scale) + grid.zero; // default rounding mode: half to even
  if (spec.symmetric) {
    const int qmax = symmetric_qmax(spec.bits);
    return static_cast<int>(std::clamp(r, double(grid.zero - qmax), double(grid.zero + qmax)));
  }
  return static_cast<int>(std::clamp(r, 0.0, double((1 << spec.bits) - 1)));
}

} // namespace ninfer
