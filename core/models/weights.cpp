#include "weights.hpp"

#include <fmt/format.h>

#include <cstring>

#include "ninfer/abi/ops/fill_random.h"
#include "ninfer/abi/plugin_abi.h"
#include "ninfer/checkpoint/random_checkpoint.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/support/hash.hpp"

namespace ninfer::models {
namespace {

// transformers' initializer_range for Qwen models, as a uniform half-width with that deviation.
constexpr float kMatrixHalfWidth = 0.02f * 1.7320508f;

} // namespace

WeightLoader::WeightLoader(const Checkpoint& ck, Backend& backend, WeightPrecision precision)
    : progress_("loading weights", static_cast<int64_t>(expected_tensors(ck.config()).size())), ck_(ck),
      backend_(backend), precision_(precision) {}

void WeightLoader::count_loaded(const std::string& name) { progress_.update(++loaded_, name); }

int32_t WeightLoader::storage_dtype(std::initializer_list<std::string> names) const {
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

Matrix WeightLoader::matrix(std::initializer_list<std::string> names, const std::string& what) {
  return stack(names, what, storage_dtype(names));
}

Matrix WeightLoader::matrix_f32(std::initializer_list<std::string> names, const std::string& what) {
  return stack(names, what, NINFER_DTYPE_F32);
}

Matrix WeightLoader::stack(std::initializer_list<std::string> names, const std::string& what, int32_t dtype) {
  Matrix m;
  m.dtype = dtype;
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
  m.buf = backend_.allocate(static_cast<size_t>(m.rows * m.cols) * elem, MemoryUse::Weights, what);
  size_t offset = 0;
  std::vector<float> f32;
  std::vector<uint16_t> b16;
  for (const auto& n : names) {
    const TensorView& t = ck_.tensor(n);
    const size_t count = static_cast<size_t>(t.numel());
    if (!t.data) {
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
  std::vector<float> f32 = t.data ? to_f32(t) : synthetic_values(t);
  v.buf = backend_.allocate(f32.size() * 4, MemoryUse::Weights, what);
  backend_.upload(v.buf, 0, f32.data(), f32.size() * 4);
  count_loaded(name);
  return v;
}

// Matrices are drawn on the backend (fill_random): gigabytes of them would otherwise be made on
// the host and copied over the bus. Each tensor has its own stream (seed mixed with its name).
void WeightLoader::fill_synthetic(const Matrix& m, size_t offset_bytes, const TensorView& t) {
  const int64_t count = t.numel();
  ninfer_fill_random_args a{};
  a.out = m.buf.as<char>() + offset_bytes;
  a.count = count;
  a.seed = *ck_.synthetic_seed() ^ fnv1a64(t.name);
  a.scale = kMatrixHalfWidth;
  a.offset = 0.0f;
  a.dtype = m.dtype;
  ninfer_shape shape{};
  shape.tokens = (count + NINFER_FILL_RANDOM_ROW - 1) / NINFER_FILL_RANDOM_ROW;
  shape.dtype = m.dtype;
  backend_.run(NINFER_OP_FILL_RANDOM, shape, &a);
}

// Small tensors (norm weights, conv weights, A_log, dt_bias) with the initialisation of
// ninfer-make-checkpoint, made on the host: their distributions matter for sane activations.
std::vector<float> WeightLoader::synthetic_values(const TensorView& t) {
  if (synthetic_specs_.empty())
    for (const ExpectedTensor& e : expected_tensors(ck_.config())) synthetic_specs_.emplace(e.name, e);
  const auto it = synthetic_specs_.find(t.name);
  if (it == synthetic_specs_.end()) throw Error(fmt::format("synthetic checkpoint: no initialisation for tensor {}", t.name));
  return random_tensor_values(it->second, *ck_.synthetic_seed());
}

} // namespace ninfer::models
