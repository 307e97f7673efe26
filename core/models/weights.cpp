#include "weights.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstring>

#include "ninfer/abi/plugin_abi.h"
#include "ninfer/support/error.hpp"

namespace ninfer::models {

WeightLoader::WeightLoader(const Checkpoint& ck, Backend& backend, WeightPrecision precision, int64_t extra_tensors)
    : progress_(backend.plan_only() ? "" : "loading weights",
                backend.plan_only() ? 0 : static_cast<int64_t>(expected_tensors(ck.config()).size()) + extra_tensors),
      ck_(ck), backend_(backend), precision_(precision), dry_(backend.plan_only()) {}

void WeightLoader::count_loaded(const std::string& name) {
  if (!dry_) progress_.update(++loaded_, name);
}

int32_t codes_dtype(QuantCodes c) {
  switch (c) {
    case QuantCodes::Int4: return NINFER_DTYPE_INT4;
    case QuantCodes::Int8: return NINFER_DTYPE_INT8;
    case QuantCodes::Fp8E4M3: return NINFER_DTYPE_FP8_E4M3;
  }
  return NINFER_DTYPE_INT4;
}

namespace {

int32_t scale_dtype(DType d) {
  return d == DType::BF16 ? NINFER_DTYPE_BF16 : d == DType::F16 ? NINFER_DTYPE_F16 : NINFER_DTYPE_F32;
}

// Whether `b` can be stacked under `a` as rows of one canonical matrix.
bool same_layout(const QuantizedMatrix& a, const QuantizedMatrix& b) {
  return a.codes_type == b.codes_type && a.cols == b.cols && a.group_size == b.group_size &&
         a.scale_dtype == b.scale_dtype && a.g_idx == b.g_idx;
}

} // namespace

int32_t WeightLoader::storage_dtype(const std::vector<std::string>& names) const {
  switch (precision_) {
    case WeightPrecision::F32: return NINFER_DTYPE_F32;
    case WeightPrecision::BF16: return NINFER_DTYPE_BF16;
    case WeightPrecision::Auto: break;
  }
  // As stored, when every part is BF16; anything else (F32, F16, a mix) becomes F32.
  for (const auto& n : names)
    if (ck_.tensor(n).dtype != DType::BF16) return NINFER_DTYPE_F32;
  return NINFER_DTYPE_BF16;
}

std::optional<QuantizedMatrix> WeightLoader::read_if_quantized(const std::string& name) {
  const auto q = find_quantized(ck_, name);
  if (!q) return std::nullopt;
  QuantizedMatrix m = read_quantized(ck_, *q, dry_ ? QuantRead::Layout : QuantRead::Values);
  count_loaded(name);
  return m;
}

namespace {

// "model.layers.0.mlp.down_proj" for "model.layers.0.mlp.down_proj.weight".
std::string module_of(const std::string& tensor) {
  const std::string suffix = ".weight";
  const bool has = tensor.size() > suffix.size() && tensor.compare(tensor.size() - suffix.size(), suffix.size(), suffix) == 0;
  return has ? tensor.substr(0, tensor.size() - suffix.size()) : tensor;
}

} // namespace

Matrix WeightLoader::matrix(const std::string& name, const std::string& what) {
  Matrix m = [&] {
    if (const SyntheticQuant* sq = ck_.synthetic_quant(name)) return synthetic_quantized({name}, *sq, what);
    if (auto q = read_if_quantized(name)) {
      std::vector<QuantizedMatrix> parts;
      parts.push_back(std::move(*q));
      return stack_quantized(parts, what);
    }
    return stack({name}, what, storage_dtype({name}));
  }();
  m.modules = {module_of(name)};
  return m;
}

Projection WeightLoader::projection(std::initializer_list<std::string> names, const std::string& what) {
  Projection p = projection_parts(names, what);
  for (const auto& n : names) p.modules.push_back(module_of(n));
  return p;
}

Projection WeightLoader::projection_parts(std::initializer_list<std::string> names, const std::string& what) {
  if (ck_.synthetic_seed()) return finish_projection(synthetic_projection(names, what), what);
  Projection p;
  std::vector<std::string> plain;
  std::vector<QuantizedMatrix> quantized;
  auto close_run = [&] {
    if (!plain.empty()) p.parts.push_back(stack(plain, what, storage_dtype(plain)));
    if (!quantized.empty()) p.parts.push_back(stack_quantized(quantized, what));
    plain.clear();
    quantized.clear();
  };
  for (const auto& n : names) {
    if (auto m = read_if_quantized(n)) {
      if (!plain.empty() || (!quantized.empty() && !same_layout(quantized.front(), *m))) close_run();
      quantized.push_back(std::move(*m));
    } else {
      if (!quantized.empty()) close_run();
      plain.push_back(n);
    }
  }
  close_run();
  return finish_projection(std::move(p), what);
}

Projection WeightLoader::finish_projection(Projection p, const std::string& what) {
  for (const Matrix& m : p.parts) {
    if (p.cols && m.cols != p.cols)
      throw Error(fmt::format("{}: its parts have {} and {} columns; stacked projections share their inputs", what,
                              p.cols, m.cols));
    p.cols = m.cols;
    p.rows += m.rows;
  }
  if (p.parts.size() > 1) {
    std::string formats;
    for (const Matrix& m : p.parts) formats += fmt::format("{}{} rows {}", formats.empty() ? "" : ", ", m.rows, m.format);
    spdlog::debug("{}: {} parts of different layouts ({}), one linear each", what, p.parts.size(), formats);
  }
  return p;
}

Matrix WeightLoader::matrix_f32(const std::string& name, const std::string& what) {
  if (const auto q = read_if_quantized(name))
    return upload_f32(dry_ ? std::vector<float>() : q->dequantize(), q->rows, q->cols, what);
  return stack({name}, what, NINFER_DTYPE_F32);
}

Matrix WeightLoader::table(const std::string& name, const std::string& what) {
  if (const auto q = find_quantized(ck_, name))
    throw Error(fmt::format("{}: {} is stored quantized ({}, {}); ninfer reads quantized linear projections, the "
                            "token embedding must be a float tensor",
                            q->file.string(), name, quant_method_name(q->method), quant_codes_name(q->codes)));
  return stack({name}, what, storage_dtype({name}));
}

Matrix WeightLoader::upload_f32(const std::vector<float>& values, int64_t rows, int64_t cols, const std::string& what) {
  Matrix m;
  m.dtype = NINFER_DTYPE_F32;
  m.rows = rows;
  m.cols = cols;
  m.format = "float32";
  m.buf = backend_.allocate_weights(static_cast<size_t>(rows * cols) * 4, m.format, what);
  backend_.upload(m.buf, 0, values.data(), values.size() * 4); // none in a dry run
  return m;
}

std::vector<uint8_t> codes_in_tiles(const std::vector<uint8_t>& row_major, int64_t rows, int64_t row_bytes,
                                    int32_t dtype) {
  const int64_t piece = dtype == NINFER_DTYPE_INT4 ? NINFER_QUANT_TILE_COLS / 2 : NINFER_QUANT_TILE_COLS;
  if (rows % NINFER_QUANT_TILE_ROWS != 0 || row_bytes % piece != 0 ||
      static_cast<int64_t>(row_major.size()) != rows * row_bytes)
    throw Error(fmt::format("internal: {} rows of {} code bytes do not make whole tiles", rows, row_bytes));
  std::vector<uint8_t> out(row_major.size());
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t b = 0; b < row_bytes; b += piece)
      std::memcpy(out.data() + ninfer_quant_tile_offset(n, b, row_bytes, piece),
                  row_major.data() + n * row_bytes + b, static_cast<size_t>(piece));
  return out;
}

// The parts (all of the same layout, same_layout) as rows of one matrix in the canonical layout.
// The repacking happened on the host (read_quantized), one tensor at a time, on threads: a small
// share of a load next to reading the file (docs/quantization.md, "Why on the host").
Matrix WeightLoader::stack_quantized(std::vector<QuantizedMatrix>& parts, const std::string& what) {
  const QuantizedMatrix& first = parts.front();
  Matrix m;
  m.dtype = codes_dtype(first.codes_type);
  m.cols = first.cols;
  m.format = first.label();
  bool any_zeros = false;
  for (const auto& p : parts) {
    m.rows += p.rows;
    any_zeros = any_zeros || !p.zeros.empty();
  }
  const int64_t G = first.groups(), row_bytes = first.row_bytes();
  const size_t scale_bytes = dtype_size(first.scale_dtype);
  m.buf = backend_.allocate_weights(static_cast<size_t>(m.rows * row_bytes), m.format, what + " codes");
  m.scales = backend_.allocate_weights(static_cast<size_t>(m.rows * G) * scale_bytes, m.format, what + " scales");
  if (any_zeros) m.zeros = backend_.allocate_weights(static_cast<size_t>(m.rows * G), m.format, what + " zero points");
  if (!first.g_idx.empty()) {
    m.g_idx = backend_.allocate_weights(first.g_idx.size() * 4, m.format, what + " g_idx");
    backend_.upload(m.g_idx, 0, first.g_idx.data(), first.g_idx.size() * 4);
  }
  m.quant.layout = backend_.code_layout(m.cols, m.rows, first.g_idx.empty() ? first.group_size : 0, m.dtype);
  if (m.quant.layout == NINFER_QUANT_LAYOUT_TILES16 && !dry_) {
    // Tiles cross the parts' boundaries (a part need not be whole bands): stacked first.
    std::vector<uint8_t> stacked;
    stacked.reserve(static_cast<size_t>(m.rows * row_bytes));
    for (auto& p : parts) {
      stacked.insert(stacked.end(), p.codes.begin(), p.codes.end());
      std::vector<uint8_t>().swap(p.codes);
    }
    const std::vector<uint8_t> tiles = codes_in_tiles(stacked, m.rows, row_bytes, m.dtype);
    backend_.upload(m.buf, 0, tiles.data(), tiles.size());
  }
  int64_t row = 0;
  for (auto& p : parts) {
    if (m.quant.layout == NINFER_QUANT_LAYOUT_ROWS)
      backend_.upload(m.buf, static_cast<size_t>(row * row_bytes), p.codes.data(), p.codes.size());
    backend_.upload(m.scales, static_cast<size_t>(row * G) * scale_bytes, p.scales.data(), p.scales.size());
    if (any_zeros) {
      // A symmetric part among asymmetric ones: its zero points written out.
      if (p.zeros.empty()) p.zeros.assign(static_cast<size_t>(p.rows * G), static_cast<uint8_t>(1u << (p.bits() - 1)));
      backend_.upload(m.zeros, static_cast<size_t>(row * G), p.zeros.data(), p.zeros.size());
    }
    row += p.rows;
  }
  m.quant.scales = m.scales.data();
  m.quant.zeros = any_zeros ? m.zeros.as<const uint8_t>() : nullptr;
  m.quant.g_idx = first.g_idx.empty() ? nullptr : m.g_idx.as<const int32_t>();
  m.quant.scale_dtype = scale_dtype(first.scale_dtype);
  m.quant.group_size = static_cast<int32_t>(first.group_size);
  return m;
}

Matrix WeightLoader::stack(const std::vector<std::string>& names, const std::string& what, int32_t dtype) {
  Matrix m;
  m.dtype = dtype;
  m.format = dtype == NINFER_DTYPE_F32 ? "float32" : "bfloat16";
  for (const auto& n : names) {
    const TensorView& t = ck_.tensor(n);
    if (t.shape.size() != 2)
      throw Error(fmt::format("{}: tensor {} has shape {}, expected a matrix", what, n, shape_string(t.shape)));
    if (m.cols && t.shape[1] != m.cols)
      throw Error(fmt::format("{}: tensor {} has {} columns, the others {}", what, n, t.shape[1], m.cols));
    m.cols = t.shape[1];
    m.rows += t.shape[0];
  }
  const size_t elem = dtype == NINFER_DTYPE_F32 ? 4 : 2;
  m.buf = backend_.allocate_weights(static_cast<size_t>(m.rows * m.cols) * elem, m.format, what);
  size_t offset = 0;
  std::vector<float> f32;
  std::vector<uint16_t> b16;
  for (const auto& n : names) {
    const TensorView& t = ck_.tensor(n);
    const size_t count = static_cast<size_t>(t.numel());
    if (dry_) {
      // sized, not read
    } else if (!t.data) {
      fill_synthetic(m, offset, t);
    } else if (dtype == NINFER_DTYPE_BF16 && t.dtype == DType::BF16) {
      // As stored: copy the bytes (the mapping may be unaligned, so never through a pointer cast).
      backend_.upload(m.buf, offset, t.data, count * 2);
    } else {
      f32.resize(count);
      to_f32(t, f32.data());
      if (dtype == NINFER_DTYPE_F32) {
        backend_.upload(m.buf, offset, f32.data(), count * 4);
      } else {
        b16.resize(count);
        for (size_t i = 0; i < count; ++i) b16[i] = f32_to_bf16(f32[i]);
        backend_.upload(m.buf, offset, b16.data(), count * 2);
      }
    }
    offset += count * elem;
    count_loaded(n);
  }
  return m;
}

Vector WeightLoader::vector(const std::string& name, const std::string& what) {
  const TensorView& t = ck_.tensor(name);
  Vector v;
  v.size = t.numel();
  v.buf = backend_.allocate_weights(static_cast<size_t>(v.size) * 4, "float32", what);
  if (!dry_) {
    const std::vector<float> f32 = t.data ? to_f32(t) : synthetic_values(t);
    backend_.upload(v.buf, 0, f32.data(), f32.size() * 4);
  }
  count_loaded(name);
  return v;
}

} // namespace ninfer::models
