// Weights of synthetic checkpoints (benchmarks, Checkpoint::synthetic): drawn on the backend
// with fill_random from the checkpoint's seed, so a 27B-parameter shape needs neither disk nor
// bus. Quantized matrices get uniform random codes and scales around the step that quantizing
// uniform random weights to nearest would give: the same bytes per step and the same kernels
// as a real checkpoint of that format.
#include <fmt/format.h>

#include "ninfer/abi/ops/fill_random.h"
#include "ninfer/checkpoint/random_checkpoint.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/support/hash.hpp"
#include "weights.hpp"

namespace ninfer::models {
namespace {

// transformers' initializer_range for Qwen models, as a uniform half-width with that deviation.
constexpr float kMatrixHalfWidth = 0.02f * 1.7320508f;

// Largest code magnitude around the zero point: 7.5 for int4 (codes 0..15 around 8, so a
// symmetric weight range maps onto the codes), 127.5 for int8, just under 2 for the finite
// e4m3 codes fill_random draws (exponents 0..7).
float code_half_range(QuantCodes c) {
  switch (c) {
    case QuantCodes::Int4: return 7.5f;
    case QuantCodes::Int8: return 127.5f;
    case QuantCodes::Fp8E4M3: return 1.875f;
  }
  return 1.0f;
}

bool same_spec(const SyntheticQuant* a, const SyntheticQuant* b) {
  if (!a || !b) return a == b;
  return a->codes == b->codes && a->group_size == b->group_size;
}

} // namespace

void WeightLoader::fill_values(const DeviceBuffer& buf, size_t offset, int64_t count, int32_t dtype, uint64_t seed,
                               float scale, float center) {
  ninfer_fill_random_args a{};
  a.out = buf.as<char>() + offset;
  a.count = count;
  a.seed = seed;
  a.scale = scale;
  a.offset = center;
  a.dtype = dtype;
  ninfer_shape shape{};
  shape.tokens = (count + NINFER_FILL_RANDOM_ROW - 1) / NINFER_FILL_RANDOM_ROW;
  shape.dtype = dtype;
  backend_.run(NINFER_OP_FILL_RANDOM, shape, &a);
}

// Each tensor has its own stream (seed mixed with its name).
void WeightLoader::fill_synthetic(const Matrix& m, size_t offset_bytes, const TensorView& t) {
  fill_values(m.buf, offset_bytes, t.numel(), m.dtype, *ck_.synthetic_seed() ^ fnv1a64(t.name), kMatrixHalfWidth, 0.0f);
}

// Small tensors (norm weights, conv weights, A_log, dt_bias) with the initialisation of
// ninfer-make-checkpoint, made on the host: their distributions matter for sane activations.
std::vector<float> WeightLoader::synthetic_values(const TensorView& t) {
  if (synthetic_specs_.empty()) {
    for (const ExpectedTensor& e : expected_tensors(ck_.config())) synthetic_specs_.emplace(e.name, e);
    for (const ExpectedTensor& e : mtp_tensors(ck_.config())) synthetic_specs_.emplace(e.name, e);
  }
  const auto it = synthetic_specs_.find(t.name);
  if (it == synthetic_specs_.end()) throw Error(fmt::format("synthetic checkpoint: no initialisation for tensor {}", t.name));
  return random_tensor_values(it->second, *ck_.synthetic_seed());
}

Projection WeightLoader::synthetic_projection(std::initializer_list<std::string> names, const std::string& what) {
  Projection p;
  std::vector<std::string> run;
  const SyntheticQuant* run_spec = nullptr;
  auto close_run = [&] {
    if (run.empty()) return;
    p.parts.push_back(run_spec ? synthetic_quantized(run, *run_spec, what) : stack(run, what, storage_dtype(run)));
    run.clear();
  };
  for (const auto& n : names) {
    const SyntheticQuant* spec = ck_.synthetic_quant(n);
    if (!run.empty() && !same_spec(spec, run_spec)) close_run();
    run_spec = spec;
    run.push_back(n);
  }
  close_run();
  return p;
}

// The named matrices (same columns) as rows of one canonical quantized matrix: symmetric codes,
// BF16 scales [N, ceil(K / g)], no g_idx.
Matrix WeightLoader::synthetic_quantized(const std::vector<std::string>& names, const SyntheticQuant& q,
                                         const std::string& what) {
  Matrix m;
  m.dtype = codes_dtype(q.codes);
  for (const auto& n : names) {
    const TensorView& t = ck_.tensor(n);
    if (m.cols && t.shape[1] != m.cols)
      throw Error(fmt::format("{}: tensor {} has {} columns, the others {}", what, n, t.shape[1], m.cols));
    m.cols = t.shape[1];
    m.rows += t.shape[0];
  }
  const int64_t group = std::min(q.group_size, m.cols);
  const int64_t G = (m.cols + group - 1) / group;
  const int64_t row_bytes = q.codes == QuantCodes::Int4 ? (m.cols + 1) / 2 : m.cols; // quant_weight.h
  m.format = q.codes == QuantCodes::Fp8E4M3 ? fmt::format("fp8 g{}", group)
             : group == m.cols ? fmt::format("{} channel", quant_codes_name(q.codes))
                               : fmt::format("{} g{}", quant_codes_name(q.codes), group);
  m.buf = backend_.allocate_weights(static_cast<size_t>(m.rows * row_bytes), m.format, what + " codes");
  m.scales = backend_.allocate_weights(static_cast<size_t>(m.rows * G) * 2, m.format, what + " scales");
  // Scales within 25% of the step that maps the initialisation's range onto the codes.
  const float step = kMatrixHalfWidth / code_half_range(q.codes);
  int64_t row = 0;
  for (const auto& n : names) {
    const int64_t rows = ck_.tensor(n).shape[0];
    const uint64_t seed = *ck_.synthetic_seed() ^ fnv1a64(n);
    fill_values(m.buf, static_cast<size_t>(row * row_bytes), rows * row_bytes, m.dtype, seed, 0.0f, 0.0f); // code bytes
    fill_values(m.scales, static_cast<size_t>(row * G) * 2, rows * G, NINFER_DTYPE_BF16, ~seed, 0.25f * step, step);
    row += rows;
    count_loaded(n);
  }
  m.quant.scales = m.scales.data();
  m.quant.zeros = nullptr;
  m.quant.g_idx = nullptr;
  m.quant.scale_dtype = NINFER_DTYPE_BF16;
  m.quant.group_size = static_cast<int32_t>(group);
  // Uniform random bytes are uniform random codes in either layout: nothing to move.
  m.quant.layout = backend_.code_layout(m.cols, m.rows, group, m.dtype);
  return m;
}

} // namespace ninfer::models
