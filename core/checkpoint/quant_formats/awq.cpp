// AWQ GEMM (quant_method awq, version gemm, 4 bits): qweight int32 [K, N/8] and qzeros int32
// [G, N/8] packed along N with AWQ's interleave (nibble i of word c holds column
// 8c + [0, 2, 4, 6, 1, 3, 5, 7][i]); scales [G, N]; W[n, k] = (q − z) · s of group k / g.
#include <fmt/format.h>

#include <algorithm>

#include "formats.hpp"
#include "ninfer/support/row_threads.hpp"
#include "packed.hpp"

namespace ninfer::quant_detail {
namespace {

// The nibble of a word that holds column 8c + j: the inverse of AWQ's order [0,2,4,6,1,3,5,7].
constexpr int kNibbleOfColumn[8] = {0, 4, 1, 5, 2, 6, 3, 7};

uint32_t awq_code(const TensorView& t, int64_t row, int64_t words_per_row, int64_t n) {
  return (word(t, row * words_per_row + n / 8) >> (4 * kNibbleOfColumn[n % 8])) & 15u;
}

} // namespace

void find_awq(const Checkpoint& ck, QuantizedModule& m) {
  m.codes = QuantCodes::Int4;
  const TensorView& qw = packed_tensor(ck, m, m.module + ".qweight", {DType::I32}, 2);
  m.file = qw.file;
  const int64_t K = qw.shape[0], N = qw.shape[1] * 8;
  if (K == 0 || N == 0) bad_tensor(qw, fmt::format("has shape {}, an empty matrix", shape_string(qw.shape)));
  m.rows = N;
  m.cols = K;
  m.group_size = canonical_group(m.scheme.group_size, K);
  const int64_t G = ceil_div(K, m.group_size);
  const std::string why = fmt::format("K = {} inputs in groups of {} and N = {} outputs (qweight's columns x 8)", K,
                                      m.group_size, N);
  expect_shape(packed_tensor(ck, m, m.module + ".qzeros", {DType::I32}, 2), {G, N / 8}, why);
  expect_shape(packed_tensor(ck, m, m.module + ".scales", {DType::F16, DType::BF16, DType::F32}, 2), {G, N}, why);
}

QuantizedMatrix read_awq(const Checkpoint& ck, const QuantizedModule& m, QuantRead what) {
  const TensorView& qw = ck.tensor(m.module + ".qweight");
  const TensorView& qz = ck.tensor(m.module + ".qzeros");
  const TensorView& sc = ck.tensor(m.module + ".scales");
  QuantizedMatrix q = start_matrix(m, sc.dtype, what);
  const int64_t N = q.rows, K = q.cols, G = q.groups(), words = N / 8;
  // Code by code (the nibble interleave), on threads over output rows (by work: a code is a load,
  // a shift, a mask and a store), 64 rows at a time so the rows being written stay in cache
  // while k walks.
  if (what == QuantRead::Values)
    for_ranges(N, threads_for(N, 4.0 * static_cast<double>(K)), [&](int64_t n0, int64_t n1) {
      for (int64_t nb = n0; nb < n1; nb += 64)
        for (int64_t k = 0; k < K; ++k)
          for (int64_t n = nb; n < std::min(nb + 64, n1); ++n) set_code(q, n, k, awq_code(qw, k, words, n));
      return std::string();
    });
  q.zeros.resize(static_cast<size_t>(N * G));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t n = 0; n < N; ++n) q.zeros[static_cast<size_t>(n * G + g)] = static_cast<uint8_t>(awq_code(qz, g, words, n));
  drop_symmetric_zeros(q);
  if (what == QuantRead::Values) transpose_scales(sc, q);
  return q;
}

} // namespace ninfer::quant_detail
