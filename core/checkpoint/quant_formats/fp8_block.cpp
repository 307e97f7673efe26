// FP8 block (quant_method fp8, weight_block_size [bn, bk]): weight F8_E4M3 [N, K] and
// weight_scale_inv [ceil(N/bn), ceil(K/bk)] in BF16, F16 or F32, a multiplier despite its name:
// W = e4m3(w) · scale_inv of the block. The block scales are expanded to per-row groups of bk
// columns, so stacked projections stay a concatenation of rows.
#include <fmt/format.h>

#include <cstring>

#include "formats.hpp"
#include "packed.hpp"

namespace ninfer::quant_detail {

void find_fp8_block(const Checkpoint& ck, QuantizedModule& m) {
  m.codes = QuantCodes::Fp8E4M3;
  const TensorView& w = packed_tensor(ck, m, m.module + ".weight", {DType::F8_E4M3}, 2);
  m.file = w.file;
  m.rows = w.shape[0];
  m.cols = w.shape[1];
  if (m.rows == 0 || m.cols == 0) bad_tensor(w, fmt::format("has shape {}, an empty matrix", shape_string(w.shape)));
  m.group_size = m.scheme.block_cols;
  const int64_t bn = m.scheme.block_rows, bk = m.scheme.block_cols;
  expect_shape(packed_tensor(ck, m, m.module + ".weight_scale_inv", {DType::BF16, DType::F16, DType::F32}, 2),
               {ceil_div(m.rows, bn), ceil_div(m.cols, bk)},
               fmt::format("weight {} in blocks of [{}, {}] (weight_block_size)", shape_string(w.shape), bn, bk));
}

QuantizedMatrix read_fp8_block(const Checkpoint& ck, const QuantizedModule& m, QuantRead what) {
  const TensorView& w = ck.tensor(m.module + ".weight");
  const TensorView& s = ck.tensor(m.module + ".weight_scale_inv");
  QuantizedMatrix q = start_matrix(m, s.dtype, what);
  if (what == QuantRead::Layout) return q;
  std::memcpy(q.codes.data(), w.data, q.codes.size());
  const int64_t G = q.groups(), bn = m.scheme.block_rows;
  const size_t e = dtype_size(s.dtype);
  q.scales.resize(static_cast<size_t>(q.rows * G) * e);
  const auto* src = static_cast<const unsigned char*>(s.data);
  for (int64_t n = 0; n < q.rows; ++n) std::memcpy(&q.scales[n * G * e], src + (n / bn) * G * e, G * e);
  return q;
}

} // namespace ninfer::quant_detail
