// What the per-format readers (gptq.cpp, awq.cpp, compressed_tensors.cpp, fp8_block.cpp)
// share: typed access to packed tensors, with errors that name the file, the tensor and the
// problem, and the canonical layout's setters.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/checkpoint/quantized_tensors.hpp"

namespace ninfer::quant_detail {

// "FILE: tensor NAME: PROBLEM"
[[noreturn]] void bad_tensor(const TensorView& t, const std::string& problem);

// Module m's tensor `name`, which must be present, of one of `dtypes`, of rank `rank`.
const TensorView& packed_tensor(const Checkpoint& ck, const QuantizedModule& m, const std::string& name,
                                std::initializer_list<DType> dtypes, size_t rank);

// The same if present; nullptr otherwise.
const TensorView* optional_tensor(const Checkpoint& ck, const QuantizedModule& m, const std::string& name,
                                  std::initializer_list<DType> dtypes, size_t rank);

// Checks t's shape; the message states both shapes and what the expected one follows from.
void expect_shape(const TensorView& t, const std::vector<int64_t>& want, const std::string& why);

// Element i of an I32 / I64 tensor (safetensors data is unaligned: memcpy).
inline uint32_t word(const TensorView& t, int64_t i) {
  uint32_t w;
  std::memcpy(&w, static_cast<const unsigned char*>(t.data) + i * 4, 4);
  return w;
}
inline int64_t i64(const TensorView& t, int64_t i) {
  int64_t v;
  std::memcpy(&v, static_cast<const unsigned char*>(t.data) + i * 8, 8);
  return v;
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The canonical group size: the scheme's, or K for one group per row.
inline int64_t canonical_group(int64_t group_size, int64_t k) { return group_size > 0 ? group_size : k; }

// An empty canonical matrix of m's shape (codes zeroed, so an odd K's last high nibble is 0;
// none for QuantRead::Layout).
QuantizedMatrix start_matrix(const QuantizedModule& m, DType scale_dtype, QuantRead what);

// dst[n][r] = src[r][n] for 32-bit words, src being t's data as R x N words: GPTQ's qweight,
// whose word r of column n holds codes 32/bits r ... 32/bits (r + 1) - 1 of output n in the
// canonical layout's order (low bits first), so its bytes are the canonical row's bytes.
void transpose_words(const TensorView& t, int64_t R, int64_t N, unsigned char* dst);

inline void set_code(QuantizedMatrix& q, int64_t n, int64_t k, uint32_t u) {
  if (q.codes_type == QuantCodes::Int4) q.codes[n * q.row_bytes() + k / 2] |= static_cast<uint8_t>(u << (4 * (k % 2)));
  else q.codes[n * q.row_bytes() + k] = static_cast<uint8_t>(u);
}

// Scales stored [G, N] (GPTQ, AWQ) into the canonical [N, G].
void transpose_scales(const TensorView& s, QuantizedMatrix& q);
// Scales stored [N, G] as they are.
void copy_scales(const TensorView& s, QuantizedMatrix& q);

// g_idx [K]: every entry within [0, G); kept only when it is not k / group_size.
void read_g_idx(const TensorView& t, QuantizedMatrix& q);

// Zero points that all equal 2^(bits - 1) are the symmetric case: dropped.
void drop_symmetric_zeros(QuantizedMatrix& q);

} // namespace ninfer::quant_detail
