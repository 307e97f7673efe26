#include "ninfer/quantize/quantized_weights.hpp"

#include <fmt/format.h>

#include <cstring>

#include "ninfer/quantize/quant_grid.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer {

namespace {

uint32_t stored_code(const QuantizedWeights& m, int64_t n, int64_t k) {
  return static_cast<uint32_t>(m.q[static_cast<size_t>(n * m.cols + k)] + (1 << (m.bits - 1)));
}

int64_t group_of(const QuantizedWeights& m, int64_t k) {
  return m.g_idx.empty() ? k / m.group : m.g_idx[static_cast<size_t>(k)];
}

int zero_of(const QuantizedWeights& m, int64_t n, int64_t g) {
  return m.zeros.empty() ? 1 << (m.bits - 1) : m.zeros[static_cast<size_t>(n * m.groups_per_row() + g)];
}

} // namespace

QuantizedWeights QuantizedWeights::sized(int64_t rows, int64_t cols, int64_t group, int bits, DType scale_dtype,
                                         bool symmetric) {
  QuantizedWeights m;
  m.rows = rows;
  m.cols = cols;
  m.bits = bits;
  m.group = group;
  m.scale_dtype = scale_dtype;
  m.symmetric = symmetric;
  m.q.resize(static_cast<size_t>(rows * cols));
  m.scales.resize(static_cast<size_t>(rows * (cols / group)));
  if (!symmetric) m.zeros.resize(m.scales.size());
  return m;
}

double QuantizedWeights::value(int64_t n, int64_t k) const {
  const int64_t g = group_of(*this, k);
  return (static_cast<double>(stored_code(*this, n, k)) - zero_of(*this, n, g)) *
         scales[static_cast<size_t>(n * groups_per_row() + g)];
}

std::vector<uint32_t> pack_compressed_tensors(const QuantizedWeights& m) {
  const int per = 32 / m.bits;
  const uint32_t mask = (1u << m.bits) - 1;
  const int64_t words = m.cols / per;
  std::vector<uint32_t> out(static_cast<size_t>(m.rows * words), 0);
  for (int64_t n = 0; n < m.rows; ++n)
    for (int64_t c = 0; c < words; ++c) {
      uint32_t word = 0;
      for (int j = 0; j < per; ++j) word |= (stored_code(m, n, c * per + j) & mask) << (m.bits * j);
      out[static_cast<size_t>(n * words + c)] = word;
    }
  return out;
}

std::vector<uint32_t> pack_compressed_tensors_zeros(const QuantizedWeights& m) {
  const int per = 32 / m.bits;
  const int64_t G = m.groups_per_row(), word_rows = (m.rows + per - 1) / per;
  std::vector<uint32_t> out(static_cast<size_t>(word_rows * G), 0);
  for (int64_t n = 0; n < m.rows; ++n)
    for (int64_t g = 0; g < G; ++g)
      out[static_cast<size_t>((n / per) * G + g)] |= static_cast<uint32_t>(zero_of(m, n, g)) << (m.bits * (n % per));
  return out;
}

std::vector<uint32_t> pack_gptq_qweight(const QuantizedWeights& m) {
  const int per = 32 / m.bits;
  const uint32_t mask = (1u << m.bits) - 1;
  const int64_t packed_rows = m.cols / per;
  std::vector<uint32_t> out(static_cast<size_t>(packed_rows * m.rows), 0);
  for (int64_t r = 0; r < packed_rows; ++r)
    for (int64_t n = 0; n < m.rows; ++n) {
      uint32_t word = 0;
      for (int j = 0; j < per; ++j) word |= (stored_code(m, n, r * per + j) & mask) << (m.bits * j);
      out[static_cast<size_t>(r * m.rows + n)] = word;
    }
  return out;
}

std::vector<uint32_t> gptq_qzeros(const QuantizedWeights& m) {
  const int per = 32 / m.bits;
  const uint32_t mask = (1u << m.bits) - 1;
  const int64_t G = m.groups_per_row(), words = m.rows / per;
  std::vector<uint32_t> out(static_cast<size_t>(G * words), 0);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t n = 0; n < words * per; ++n) {
      // checkpoint_format gptq stores zero − 1; asymmetric grids for it keep zero >= 1 (GridSpec::min_zero).
      const uint32_t stored = static_cast<uint32_t>(zero_of(m, n, g) - 1) & mask;
      out[static_cast<size_t>(g * words + n / per)] |= stored << (m.bits * (n % per));
    }
  return out;
}

std::vector<float> gptq_scales(const QuantizedWeights& m) {
  const int64_t G = m.groups_per_row();
  std::vector<float> out(static_cast<size_t>(G * m.rows));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t n = 0; n < m.rows; ++n) out[static_cast<size_t>(g * m.rows + n)] = m.scales[static_cast<size_t>(n * G + g)];
  return out;
}

std::vector<int32_t> gptq_g_idx(const QuantizedWeights& m) {
  std::vector<int32_t> out(static_cast<size_t>(m.cols));
  for (int64_t k = 0; k < m.cols; ++k) out[static_cast<size_t>(k)] = static_cast<int32_t>(group_of(m, k));
  return out;
}

void append_scalar(std::string& out, float v, DType dtype) {
  switch (dtype) {
    case DType::F32: {
      char b[4];
      std::memcpy(b, &v, 4);
      out.append(b, 4);
      return;
    }
    case DType::BF16:
    case DType::F16: {
      const uint16_t h = dtype == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
      out.push_back(static_cast<char>(h & 0xff));
      out.push_back(static_cast<char>(h >> 8));
      return;
    }
    default: break;
  }
  throw Error(fmt::format("quantize: scales cannot be stored as {}", dtype_name(dtype)));
}

} // namespace ninfer
