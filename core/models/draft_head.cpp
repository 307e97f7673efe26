#include "draft_head.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ninfer/checkpoint/checkpoint.hpp"
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

// The bfloat16 at or above v >= 0 (finite): the group's step, so max|w| / step <= 7 and no code
// is ever clamped.
uint16_t bf16_at_or_above(float v) {
  const uint16_t b = f32_to_bf16(v);
  return bf16_to_f32(b) >= v ? b : static_cast<uint16_t>(b + 1);
}

// Rows [begin, end): each group's step max|w| / 7 (in bfloat16) and its codes round(w / step) + 8,
// the even column in a byte's low nibble. Returns the first problem instead of throwing, so the
// rows can go on threads (for_ranges).
std::string quantize_rows(const std::vector<float>& w, int64_t cols, int64_t group, int64_t begin, int64_t end,
                          std::vector<uint8_t>& codes, std::vector<uint16_t>& scales) {
  const int64_t row_bytes = (cols + 1) / 2, G = cols / group;
  for (int64_t n = begin; n < end; ++n)
    for (int64_t g = 0; g < G; ++g) {
      const float* x = w.data() + n * cols + g * group;
      float hi = 0;
      for (int64_t k = 0; k < group; ++k) {
        if (!std::isfinite(x[k]))
          return fmt::format("lm_head: element [{}, {}] is {}; draft_head int4 quantizes finite rows only", n,
                             g * group + k, x[k]);
        hi = std::max(hi, std::fabs(x[k]));
      }
      const uint16_t step = bf16_at_or_above(hi / 7);
      scales[static_cast<size_t>(n * G + g)] = step;
      const float inv = hi > 0 ? 1 / bf16_to_f32(step) : 0;
      for (int64_t k = 0; k < group; ++k) {
        const auto u = static_cast<uint8_t>(std::lround(std::clamp(x[k] * inv, -7.f, 7.f)) + 8);
        const int64_t c = g * group + k;
        codes[static_cast<size_t>(n * row_bytes + c / 2)] |= static_cast<uint8_t>(c % 2 ? u << 4 : u);
      }
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
  m.quant.layout = be.code_layout(K, rows, group, NINFER_DTYPE_INT4);
  if (be.plan_only()) return m;
  spdlog::info("drafter's LM head: token ids below {} quantized to int4 in groups of {}", rows, group);
  std::vector<uint8_t> codes(static_cast<size_t>(rows * row_bytes), 0);
  std::vector<uint16_t> scales(static_cast<size_t>(rows * G));
  const std::vector<float> w = read_rows(be, lm_head, rows);
  // Rows are independent (each its own bytes), so threads give the bytes one would: the whole
  // vocabulary of a 27B is 1.3 billion weights.
  for_ranges(rows, threads_for(rows, static_cast<double>(K)),
             [&](int64_t b, int64_t e) { return quantize_rows(w, K, group, b, e, codes, scales); });
  if (m.quant.layout == NINFER_QUANT_LAYOUT_TILES16) codes = codes_in_tiles(codes, rows, row_bytes, m.dtype);
  be.upload(m.buf, 0, codes.data(), codes.size());
  be.upload(m.scales, 0, scales.data(), scales.size() * sizeof(uint16_t));
  return m;
}

} // namespace ninfer::models
