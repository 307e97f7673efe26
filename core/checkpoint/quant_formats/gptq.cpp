// GPTQ (quant_method gptq): qweight int32 [K·bits/32, N], element (32/bits)·r + j of column n at
// bits bits·j of row r; qzeros int32 [G, N·bits/32] packed the same way along N; scales [G, N];
// g_idx int32 [K]. W[n, k] = (q[k, n] − z[g_idx[k], n]) · s[g_idx[k], n]; checkpoint_format
// gptq stores z − 1, gptq_v2 stores z.
#include <fmt/format.h>

#include "formats.hpp"
#include "packed.hpp"

namespace ninfer::quant_detail {

void find_gptq(const Checkpoint& ck, QuantizedModule& m) {
  const int32_t bits = m.scheme.bits, per_word = 32 / bits;
  m.codes = bits == 4 ? QuantCodes::Int4 : QuantCodes::Int8;
  const TensorView& qw = packed_tensor(ck, m, m.module + ".qweight", {DType::I32}, 2);
  m.file = qw.file;
  const int64_t K = qw.shape[0] * per_word, N = qw.shape[1];
  m.rows = N;
  m.cols = K;
  m.group_size = canonical_group(m.scheme.group_size, K);
  if (K == 0 || N == 0) bad_tensor(qw, fmt::format("has shape {}, an empty matrix", shape_string(qw.shape)));
  if (N % per_word)
    bad_tensor(qw, fmt::format("holds N = {} outputs; GPTQ packs the zero points of {} outputs per int32 word "
                               "({} bits), so N must be a multiple of {}",
                               N, per_word, bits, per_word));
  const int64_t G = ceil_div(K, m.group_size);
  const std::string why =
      fmt::format("K = {} inputs (qweight's rows x {}) in groups of {} and N = {} outputs at {} bits", K, per_word,
                  m.group_size, N, bits);
  expect_shape(packed_tensor(ck, m, m.module + ".qzeros", {DType::I32}, 2), {G, N / per_word}, why);
  expect_shape(packed_tensor(ck, m, m.module + ".scales", {DType::F16, DType::BF16, DType::F32}, 2), {G, N}, why);
  if (const TensorView* g = optional_tensor(ck, m, m.module + ".g_idx", {DType::I32}, 1)) expect_shape(*g, {K}, why);
}

QuantizedMatrix read_gptq(const Checkpoint& ck, const QuantizedModule& m, const QuantizationConfig& c, QuantRead what) {
  const TensorView& qw = ck.tensor(m.module + ".qweight");
  const TensorView& qz = ck.tensor(m.module + ".qzeros");
  const TensorView& sc = ck.tensor(m.module + ".scales");
  QuantizedMatrix q = start_matrix(m, sc.dtype, what);
  const int32_t bits = q.bits(), per_word = 32 / bits;
  const uint32_t mask = (1u << bits) - 1;
  const int64_t N = q.rows, G = q.groups();
  if (what == QuantRead::Values) transpose_words(qw, qw.shape[0], N, q.codes.data()); // row_bytes = 4 x qw rows
  q.zeros.resize(static_cast<size_t>(N * G));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t col = 0; col < N / per_word; ++col) {
      const uint32_t w = word(qz, g * (N / per_word) + col);
      for (int32_t j = 0; j < per_word; ++j) {
        const int64_t n = col * per_word + j;
        const uint32_t z = ((w >> (bits * j)) & mask) + (c.gptq_v2 ? 0 : 1);
        if (z > 255)
          bad_tensor(qz, fmt::format("holds {} for group {} of output {}: in checkpoint_format gptq (zero - 1 "
                                     "stored) that is a zero point of {}, beyond what {} bits can express",
                                     z - 1, g, n, z, bits));
        q.zeros[static_cast<size_t>(n * G + g)] = static_cast<uint8_t>(z);
      }
    }
  drop_symmetric_zeros(q);
  if (what == QuantRead::Values) transpose_scales(sc, q);
  if (ck.has(m.module + ".g_idx")) read_g_idx(ck.tensor(m.module + ".g_idx"), q);
  return q;
}

} // namespace ninfer::quant_detail
