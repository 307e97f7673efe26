// compressed-tensors pack-quantized (int4 / int8): weight_packed int32 [N, ceil(K·bits/32)],
// element j of a word at bits bits·j along K, stored as q + 2^(bits−1) (the unsigned code);
// weight_scale [N, G]; weight_shape int64 [2] = [N, K]; asymmetric schemes add
// weight_zero_point int32 [ceil(N·bits/32), G] packed the same way along N (also offset by
// 2^(bits−1)); actorder group adds weight_g_idx int32 [K]. W = (u − z) · s, z = 2^(bits−1)
// when symmetric.
#include <fmt/format.h>

#include "formats.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/support/row_threads.hpp"
#include "packed.hpp"

namespace ninfer::quant_detail {

void find_compressed_tensors(const Checkpoint& ck, QuantizedModule& m) {
  const int32_t bits = m.scheme.bits, per_word = 32 / bits;
  m.codes = bits == 4 ? QuantCodes::Int4 : QuantCodes::Int8;
  const TensorView& wp = packed_tensor(ck, m, m.module + ".weight_packed", {DType::I32}, 2);
  m.file = wp.file;
  const TensorView& ws = packed_tensor(ck, m, m.module + ".weight_shape", {DType::I64}, 1);
  if (ws.shape != std::vector<int64_t>{2}) bad_tensor(ws, fmt::format("has shape {}, expected [2]", shape_string(ws.shape)));
  const int64_t N = i64(ws, 0), K = i64(ws, 1);
  if (N < 1 || K < 1 || N > (int64_t{1} << 31) || K > (int64_t{1} << 31))
    bad_tensor(ws, fmt::format("holds [{}, {}], not the shape of a matrix", N, K));
  m.rows = N;
  m.cols = K;
  m.group_size = canonical_group(m.scheme.group_size, K);
  const int64_t G = ceil_div(K, m.group_size);
  const std::string why = fmt::format("weight_shape [{}, {}] at {} bits in groups of {}", N, K, bits, m.group_size);
  expect_shape(wp, {N, ceil_div(K, per_word)}, why);
  expect_shape(packed_tensor(ck, m, m.module + ".weight_scale", {DType::F16, DType::BF16, DType::F32}, 2), {N, G},
               why);
  const TensorView* zp = optional_tensor(ck, m, m.module + ".weight_zero_point", {DType::I32}, 2);
  if (zp) expect_shape(*zp, {ceil_div(N, per_word), G}, why);
  else if (!m.scheme.symmetric)
    throw Error(fmt::format("{}: module {} is asymmetric (symmetric: false in its config group) but tensor "
                            "{}.weight_zero_point is missing",
                            m.file.string(), m.module, m.module));
  if (const TensorView* g = optional_tensor(ck, m, m.module + ".weight_g_idx", {DType::I32}, 1)) expect_shape(*g, {K}, why);
}

QuantizedMatrix read_compressed_tensors(const Checkpoint& ck, const QuantizedModule& m, QuantRead what) {
  const TensorView& wp = ck.tensor(m.module + ".weight_packed");
  const TensorView& sc = ck.tensor(m.module + ".weight_scale");
  QuantizedMatrix q = start_matrix(m, sc.dtype, what);
  const int32_t bits = q.bits(), per_word = 32 / bits;
  const uint32_t mask = (1u << bits) - 1;
  const int64_t N = q.rows, K = q.cols, G = q.groups(), words = wp.shape[1];
  // A packed row's bytes are the canonical row's (codes low bits first); an odd K's last int4
  // byte keeps only its low nibble, as the canonical layout pads with zero.
  if (what == QuantRead::Values)
    for_ranges(N, threads_for(N, static_cast<double>(q.row_bytes())), [&](int64_t n0, int64_t n1) {
      const auto* src = static_cast<const unsigned char*>(wp.data);
      const int64_t rb = q.row_bytes();
      for (int64_t n = n0; n < n1; ++n) {
        unsigned char* row = q.codes.data() + n * rb;
        std::memcpy(row, src + n * words * 4, static_cast<size_t>(rb));
        if (bits == 4 && K % 2) row[rb - 1] &= 0x0f;
      }
      return std::string();
    });
  if (what == QuantRead::Values) copy_scales(sc, q);
  if (ck.has(m.module + ".weight_zero_point")) {
    const TensorView& zp = ck.tensor(m.module + ".weight_zero_point");
    q.zeros.resize(static_cast<size_t>(N * G));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t g = 0; g < G; ++g)
        q.zeros[static_cast<size_t>(n * G + g)] =
            static_cast<uint8_t>((word(zp, (n / per_word) * G + g) >> (bits * (n % per_word))) & mask);
    drop_symmetric_zeros(q);
  }
  if (ck.has(m.module + ".weight_g_idx")) read_g_idx(ck.tensor(m.module + ".weight_g_idx"), q);
  return q;
}

} // namespace ninfer::quant_detail
