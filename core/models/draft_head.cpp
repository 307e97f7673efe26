#include "draft_head.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/quantize/rtn.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/support/row_threads.hpp"

namespace ninfer::models {

namespace {

constexpr int64_t kGroup = 128;

std::vector<float> read_rows(Backend& be, const Matrix& w, int64_t rows) {
  const auto n = static_cast<size_t>(rows * w.cols);
  std::vector<float> out(n);
  if (w.dtype == NINFER_DTYPE_F32) {
    be.download(w.buf, 0, out.data(), n * sizeof(float));
    return out;
  }
  std::vector<uint16_t> raw(n);
  be.download(w.buf, 0, raw.data(), n * sizeof(uint16_t));
  for (size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(raw[i]);
  return out;
}

// Rows [begin, end) of `q` in the canonical int4 layout: code q + 8, the even column in a byte's
// low nibble.
std::string pack_rows(const QuantizedWeights& q, int64_t begin, int64_t end, std::vector<uint8_t>& codes) {
  const int64_t cols = q.cols, row_bytes = (cols + 1) / 2;
  for (int64_t n = begin; n < end; ++n)
    for (int64_t c = 0; c < cols; ++c) {
      const auto u = static_cast<uint8_t>(q.q[static_cast<size_t>(n * cols + c)] + 8);
      codes[static_cast<size_t>(n * row_bytes + c / 2)] |= static_cast<uint8_t>(c % 2 ? u << 4 : u);
    }
  return {};
}

} // namespace

Matrix int4_draft_rows(Backend& be, const Matrix& lm_head, int64_t rows) {
  if (lm_head.dtype != NINFER_DTYPE_F32 && lm_head.dtype != NINFER_DTYPE_BF16)
    throw Error(fmt::format("draft_head int4 quantizes a float32 or bfloat16 LM head; this one is stored as {}: "
                            "its own rows are already compact, use draft_head lm_head",
                            lm_head.format));
  const int64_t K = lm_head.cols, group = K % kGroup == 0 ? kGroup : K, G = K / group;
  Matrix m;
  m.dtype = NINFER_DTYPE_INT4;
  m.rows = rows;
  m.cols = K;
  m.format = fmt::format("int4 g{} (drafter)", group);
  m.modules = {"lm_head (drafter rows)"};
  const int64_t row_bytes = (K + 1) / 2;
  m.buf = be.allocate_weights(static_cast<size_t>(rows * row_bytes), m.format, "drafter's LM head codes");
  m.scales = be.allocate_weights(static_cast<size_t>(rows * G) * sizeof(uint16_t), m.format,
                                 "drafter's LM head scales");
  m.quant.scales = m.scales.data();
  m.quant.scale_dtype = NINFER_DTYPE_BF16;
  m.quant.group_size = static_cast<int32_t>(group);
  if (be.plan_only()) return m;
  spdlog::info("drafter's LM head: token ids below {} quantized to int4 in groups of {}", rows, group);
  const QuantizedWeights q = rtn_quantize(read_rows(be, lm_head, rows).data(), rows, K, group,
                                          GridSpec{.bits = 4, .symmetric = true, .scale_dtype = DType::BF16},
                                          "lm_head (drafter rows)");
  std::vector<uint8_t> codes(static_cast<size_t>(rows * row_bytes), 0);
  // Rows are independent (each its own bytes), so threads give the bytes one would: the whole
  // vocabulary of a 27B is 1.3 billion weights.
  for_ranges(rows, threads_for(rows, static_cast<double>(K)),
             [&](int64_t b, int64_t e) { return pack_rows(q, b, e, codes); });
  std::vector<uint16_t> scales(q.scales.size());
  std::transform(q.scales.begin(), q.scales.end(), scales.begin(), f32_to_bf16); // exact: the grid's scales are bf16
  be.upload(m.buf, 0, codes.data(), codes.size());
  be.upload(m.scales, 0, scales.data(), scales.size() * sizeof(uint16_t));
  return m;
}

} // namespace ninfer::models
