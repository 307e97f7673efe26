// One weight matrix W[N, K] (N outputs, K inputs) quantized per group of input channels, as
// round to nearest (rtn.hpp) and GPTQ (gptq.hpp) produce it, and the tensors of the two layouts
// ninfer-quantize writes (docs/ninfer-quantize.md, "Layouts written").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ninfer/checkpoint/checkpoint.hpp"

namespace ninfer {

struct QuantizedWeights {
  int64_t rows = 0;  // N
  int64_t cols = 0;  // K
  int bits = 4;
  int64_t group = 0; // input channels per scale (cols for one scale per output channel)
  DType scale_dtype = DType::BF16;
  bool symmetric = true;
  // [N, K]: the unsigned code minus 2^(bits−1), which both layouts add back when they store it;
  // symmetric codes lie in [−qmax, qmax].
  std::vector<int8_t> q;
  std::vector<float> scales;  // [N, K / group], each exactly representable in scale_dtype
  std::vector<uint8_t> zeros; // [N, K / group] unsigned zero points; empty when symmetric (2^(bits−1))
  std::vector<int32_t> g_idx; // [K] the group of each input channel; empty: k / group
  int64_t groups_per_row() const { return cols / group; }
  // A matrix of this shape and scheme, its codes, scales and (asymmetric) zero points sized, all 0.
  static QuantizedWeights sized(int64_t rows, int64_t cols, int64_t group, int bits, DType scale_dtype,
                                bool symmetric);
  // W[n, k] as the codes say: (q + 2^(bits−1) − zero) · scale of k's group.
  double value(int64_t n, int64_t k) const;
};

// compressed-tensors pack-quantized: int32 [N, K·bits/32]; element j of a word at bits bits·j,
// along K, stored as q + 2^(bits−1). K must be a multiple of 32 / bits.
std::vector<uint32_t> pack_compressed_tensors(const QuantizedWeights& m);
// weight_zero_point (asymmetric only): int32 [⌈N·bits/32⌉, K/group], the unsigned zero point of
// output n at bits bits·(n mod 32/bits) of word ⌊n / (32/bits)⌋ of its group's column.
std::vector<uint32_t> pack_compressed_tensors_zeros(const QuantizedWeights& m);

// GPTQ (checkpoint_format gptq): qweight int32 [K·bits/32, N], element (32/bits)·r + j of column
// n at bits bits·j of row r, stored as q + 2^(bits−1).
std::vector<uint32_t> pack_gptq_qweight(const QuantizedWeights& m);
// qzeros int32 [K/group, N·bits/32]: each zero point stored minus one, packed along N (2^(bits−1)
// − 1 everywhere when symmetric). N must be a multiple of 32 / bits.
std::vector<uint32_t> gptq_qzeros(const QuantizedWeights& m);
// scales [K/group, N] (the transpose of QuantizedWeights::scales).
std::vector<float> gptq_scales(const QuantizedWeights& m);
// g_idx int32 [K]: m.g_idx, or k / group.
std::vector<int32_t> gptq_g_idx(const QuantizedWeights& m);

// The stored bits of a float that the dtype represents exactly (little-endian element bytes are
// appended to `out`).
void append_scalar(std::string& out, float v, DType dtype);

} // namespace ninfer
