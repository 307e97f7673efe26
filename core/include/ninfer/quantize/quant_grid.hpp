// The grid one group of weights is rounded onto, shared by round to nearest and GPTQ: a scale
// the output's scale dtype holds exactly and a zero point, w ≈ (u − zero) · scale for unsigned
// codes u in [0, 2^bits). docs/ninfer-quantize.md ("The grid") states the rules:
//
//   symmetric   zero = 2^(bits−1), scale = float32(max|w|) / qmax (qmax = 2^(bits−1) − 1),
//               codes u − zero in [−qmax, qmax]
//   asymmetric  lo = min(min w, 0), hi = max(max w, 0), scale = float32(hi − lo) / (2^bits − 1),
//               zero = round(−lo / scale) in [min_zero, 2^bits − 1], codes in [0, 2^bits − 1]
//
// Either scale is rounded to nearest even in the scale dtype and raised one value of the dtype
// at a time until every weight of the group lies within half a step of the grid's ends; an
// all-zero group gets scale 1. A code is round-half-to-even(w / scale) + zero, the quotient in
// float64, clamped to the grid.
#pragma once

#include <cstdint>
#include <string>

#include "ninfer/checkpoint/checkpoint.hpp"

namespace ninfer {

struct GridSpec {
  int bits = 4;
  bool symmetric = true;
  DType scale_dtype = DType::BF16;
  // Smallest zero point an asymmetric grid may use: 1 for GPTQ's checkpoint_format gptq, which
  // stores zero − 1 in `bits` bits (a zero of 0 would read back as 2^bits).
  int min_zero = 0;
};

struct GroupGrid {
  float scale = 1;
  int zero = 0; // unsigned, in [0, 2^bits)
};

// Largest symmetric code magnitude: 7 for 4 bits, 127 for 8.
int symmetric_qmax(int bits);

// The grid of a group whose weights span [lo, hi] (lo <= hi, both finite). Returns an empty
// string, or the problem (a scale the dtype cannot hold: above 65504 in float16) for the caller
// to name the tensor.
std::string choose_grid(double lo, double hi, const GridSpec& spec, GroupGrid& grid);

// The unsigned code of w on `grid`.
int grid_code(double w, const GroupGrid& grid, const GridSpec& spec);

// The value code u stands for: (u − zero) · scale, exact in float64.
inline double grid_value(int u, const GroupGrid& grid) { return static_cast<double>(u - grid.zero) * grid.scale; }

// The value nearest to v that `d` represents (BF16, F16 or F32; ties to even).
float round_to_scale_dtype(float v, DType d);
// IEEE binary16, round to nearest even, with subnormals; overflow gives infinity.
uint16_t f32_to_f16(float f);

} // namespace ninfer
