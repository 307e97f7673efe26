// AWQ GEMM (quant_method awq, version gemm, 4 bits): qweight int32 [K, N/8] and qzeros int32
// [G, N/8] packed along N with AWQ's interleave (nibble i of word c holds column
// 8c + [0, 2, 4, 6, 1, 3, 5, 7][i]); scales [G, N]; W[n, k] = (q − z) · s of group k / g.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "formats.hpp"
#include "ninfer/support/row_threads.hpp"
#include "packed.hpp"

namespace ninfer::quant_detail {
namespace {

// The column (past 8c) nibble p of a word holds: AWQ's order.
constexpr std::array<int, 8> kColumnOfNibble = {0, 2, 4, 6, 1, 3, 5, 7};
// The nibble of a word that holds column 8c + j: its inverse.
constexpr std::array<int, 8> kNibbleOfColumn = [] {
  std::array<int, 8> n{};
  for (int p = 0; p < 8; ++p) n[static_cast<size_t>(kColumnOfNibble[static_cast<size_t>(p)])] = p;
  return n;
}();

// The 8 x 8 nibble matrix of words a (row i: word i, column p: nibble p) transposed in place,
// by swaps of its 4 x 4, 2 x 2 and 1 x 1 blocks: word p then holds what nibble p of the 8 words
// held, nibble i from word i.
void transpose_nibbles(uint32_t (&a)[8]) {
  for (int i = 0; i < 4; ++i) {
    const uint32_t t = ((a[i] >> 16) ^ a[i + 4]) & 0x0000FFFFu;
    a[i + 4] ^= t, a[i] ^= t << 16;
  }
  for (int i : {0, 1, 4, 5}) {
    const uint32_t t = ((a[i] >> 8) ^ a[i + 2]) & 0x00FF00FFu;
    a[i + 2] ^= t, a[i] ^= t << 8;
  }
  for (int i : {0, 2, 4, 6}) {
    const uint32_t t = ((a[i] >> 4) ^ a[i + 1]) & 0x0F0F0F0Fu;
    a[i + 1] ^= t, a[i] ^= t << 4;
  }
}

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
  // 8 inputs of one word column at a time: the 8 words (one per input, 8 outputs each) are an
  // 8 x 8 nibble matrix whose transpose is, word by word, 8 inputs of one output in the canonical
  // order (nibble i: input k0 + i), so a whole 32-bit word of each of the 8 output rows is written
  // at once; inputs past the last multiple of 8 code by code. On threads over word columns, 16 at
  // a time so the rows being written stay in cache while k walks.
  if (what == QuantRead::Values) {
    const int64_t K8 = K / 8 * 8, row_bytes = static_cast<int64_t>(q.row_bytes());
    for_ranges(words, threads_for(words, 32.0 * static_cast<double>(K)), [&](int64_t c0, int64_t c1) {
      for (int64_t cb = c0; cb < c1; cb += 16) {
        const int64_t ce = std::min(cb + 16, c1);
        for (int64_t k0 = 0; k0 < K8; k0 += 8)
          for (int64_t c = cb; c < ce; ++c) {
            uint32_t a[8];
            for (int i = 0; i < 8; ++i) a[i] = word(qw, (k0 + i) * words + c);
            transpose_nibbles(a);
            for (int p = 0; p < 8; ++p)
              std::memcpy(q.codes.data() + (8 * c + kColumnOfNibble[p]) * row_bytes + k0 / 2, &a[p], 4);
          }
        for (int64_t k = K8; k < K; ++k)
          for (int64_t n = 8 * cb; n < 8 * ce; ++n) set_code(q, n, k, awq_code(qw, k, words, n));
      }
      return std::string();
    });
  }
  q.zeros.resize(static_cast<size_t>(N * G));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t n = 0; n < N; ++n) q.zeros[static_cast<size_t>(n * G + g)] = static_cast<uint8_t>(awq_code(qz, g, words, n));
  drop_symmetric_zeros(q);
  if (what == QuantRead::Values) transpose_scales(sc, q);
  return q;
}

} // namespace ninfer::quant_detail
