// The tests' own reading of the quantized layouts, written from the published definitions
// (/work/shared/fixtures/quant/README.md, docs/ninfer-quantize.md) in float64 and independent of
// core/quantize: dequantization of what the tool writes, and a reference quantize-and-pack
// with the documented RTN convention to compare its bits with.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "raw_safetensors.hpp"

namespace ninfer::test {

// Element i of a raw F32 / BF16 / F16 / I32 / I64 tensor as a double (exact for each).
double raw_value(const RawTensor& t, size_t i);
std::vector<double> raw_values(const RawTensor& t);
uint32_t raw_u32(const RawTensor& t, size_t i);

// The value nearest to x (ties to even) in "BF16", "F16" or "F32", by scaling to the format's
// quantum at x's binade; overflow gives infinity.
double round_to_format(double x, const std::string& dtype);

struct Dequantized {
  int64_t rows = 0, cols = 0;
  std::vector<double> w;     // [N, K]
  std::vector<double> step;  // [N, K]: the scale that multiplies element (n, k)
};

// compressed-tensors pack-quantized: W = (stored − zero) · s of k's group, element j of a word
// at bits bits·j along K; zero = 2^(bits−1), or from weight_zero_point (packed along N) when
// present; the group is k / group_size, or weight_g_idx[k] when present. `module` without the
// ".weight_packed" suffix.
Dequantized dequantize_compressed_tensors(const RawTensors& t, const std::string& module, int bits);
// GPTQ, checkpoint_format gptq: W[n, k] = (q[k, n] − (z + 1)) · s[g_idx[k], n].
Dequantized dequantize_gptq(const RawTensors& t, const std::string& module, int bits);

// The RTN convention of docs/ninfer-quantize.md: s = round(float32(absmax) / qmax) in the scale
// dtype, raised to the dtype's next value while absmax / s > qmax + 1/2; s = 1 for an all-zero
// group; q = round-half-even(w / s) clamped to ±qmax.
struct OracleQuant {
  int64_t rows = 0, cols = 0, group = 0;
  int bits = 4;
  std::vector<int> q;          // [N, K]
  std::vector<double> scales;  // [N, K / group]
};
OracleQuant oracle_quantize(const std::vector<double>& w, int64_t rows, int64_t cols, int bits, int64_t group,
                            const std::string& scale_dtype);

// The packed words each layout stores for `q` (from the layout definitions).
std::vector<uint32_t> oracle_pack_compressed_tensors(const OracleQuant& q);
std::vector<uint32_t> oracle_pack_gptq_qweight(const OracleQuant& q);

} // namespace ninfer::test
