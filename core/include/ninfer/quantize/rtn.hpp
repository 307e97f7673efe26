// Round-to-nearest (RTN) quantization of one weight matrix W[N, K] (N outputs, K inputs),
// symmetric, per group of `group` consecutive input channels of a row, and the packings of
// the two layouts ninfer-quantize writes (docs/ninfer-quantize.md):
//
//   scale s = float32(max|w| over the group) / (2^(bits-1) - 1), rounded to nearest even in the
//             scale dtype (one ulp up if that leaves max|w| / s above qmax + 1/2); an all-zero
//             group gets s = 1
//   code  q = round-half-to-even(w / s) (the quotient in float64), clamped to [-qmax, qmax]
//
// so every dequantized q·s lies within s/2 of w, and the extreme of each group is exact.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ninfer/checkpoint/checkpoint.hpp"

namespace ninfer {

struct RtnMatrix {
  int64_t rows = 0;  // N
  int64_t cols = 0;  // K
  int bits = 4;
  int64_t group = 0; // input channels per scale (cols for one scale per output channel)
  DType scale_dtype = DType::BF16;
  std::vector<int8_t> q;      // [N, K], codes in [-qmax, qmax]
  std::vector<float> scales;  // [N, K / group], each exactly representable in scale_dtype
  int64_t groups_per_row() const { return cols / group; }
};

// Largest code magnitude: 7 for 4 bits, 127 for 8.
int rtn_qmax(int bits);

// `w` is W[N, K] row-major in float32; `group` must divide K (kChannelGroup is resolved by the
// caller to K). Throws ninfer::Error naming `tensor` for a non-finite weight or a scale the
// scale dtype cannot hold (over 65504 in float16).
RtnMatrix rtn_quantize(const float* w, int64_t rows, int64_t cols, int bits, int64_t group, DType scale_dtype,
                       const std::string& tensor);

// compressed-tensors pack-quantized: int32 [N, K·bits/32]; element j of a word at bits bits·j,
// along K, stored as q + 2^(bits-1). K must be a multiple of 32 / bits.
std::vector<uint32_t> pack_compressed_tensors(const RtnMatrix& m);

// GPTQ (checkpoint_format gptq, symmetric): qweight int32 [K·bits/32, N], element (32/bits)·r + j
// of column n at bits bits·j of row r, stored as q + 2^(bits-1).
std::vector<uint32_t> pack_gptq_qweight(const RtnMatrix& m);
// qzeros int32 [K/group, N·bits/32]: the zero point 2^(bits-1) stored minus one, packed along N.
// N must be a multiple of 32 / bits.
std::vector<uint32_t> gptq_qzeros(const RtnMatrix& m);
// scales [K/group, N] (the transpose of RtnMatrix::scales).
std::vector<float> gptq_scales(const RtnMatrix& m);
// g_idx int32 [K] = k / group.
std::vector<int32_t> gptq_g_idx(const RtnMatrix& m);

// The stored bits of a float that the dtype represents exactly (little-endian element bytes are
// appended to `out`).
void append_scalar(std::string& out, float v, DType dtype);
// IEEE binary16, round to nearest even, with subnormals; overflow gives infinity.
uint16_t f32_to_f16(float f);

} // namespace ninfer
