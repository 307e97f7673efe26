// Weights on the backend, and the loader that puts them there from a Checkpoint: dtype policy
// (WeightPrecision), quantized projections in the canonical layout (ninfer/abi/ops/quant_weight.h),
// row-stacking of projections that run as one matrix (q|k|v, gate|up, qkv|z|a|b), and shape
// checks that name the tensor.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ninfer/abi/ops/quant_weight.h"
#include "ninfer/abi/plugin_abi.h"
#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/checkpoint/expected_tensors.hpp"
#include "ninfer/checkpoint/progress.hpp"
#include "ninfer/checkpoint/quantized_tensors.hpp"
#include "ninfer/models/causal_lm.hpp"
#include "ninfer/runtime/backend.hpp"

namespace ninfer::models {

// A [rows, cols] matrix for the linear / embedding ops: F32 or BF16 elements in `buf`, or a
// quantized matrix (INT4, INT8, FP8_E4M3) whose codes are in `buf` and whose scales, zero points
// and g_idx are in the buffers below, described by `quant` (which points into them).
struct Matrix {
  DeviceBuffer buf;
  int32_t dtype = 0; // ninfer_dtype
  int64_t rows = 0, cols = 0;
  DeviceBuffer scales, zeros, g_idx; // quantized dtypes only (zeros, g_idx may stay empty)
  ninfer_quant_weight quant{};
  std::string format; // storage format: "float32", "bfloat16", "gptq int4 g128", ...
  // The checkpoint modules whose rows it holds ("model.layers.0.self_attn.q_proj", ...), for
  // observers of the projections' inputs (ninfer/models/linear_observer.hpp).
  std::vector<std::string> modules;

  // What linear / norm_linear take as `wq`: NULL for float weights.
  const ninfer_quant_weight* wq() const { return ninfer_dtype_is_quantized(dtype) ? &quant : nullptr; }
};

// Matrices with the same cols whose rows are stacked (q|k|v, gate|up, qkv|z|a|b): the ops write
// part i's outputs right after part i-1's. One part wherever the tensors can be one matrix (all
// float, or all quantized in the same codes, group size, scale dtype and g_idx); a quantized
// run and a float one (Qwen3.5's qkv|z quantized, a|b not), or quantized parts that differ
// (act-order checkpoints give every projection its own g_idx), stay separate parts.
struct Projection {
  std::vector<Matrix> parts;
  int64_t rows = 0, cols = 0;
  std::vector<std::string> modules; // every part's, in order
};

// A float32 vector or small tensor (norm weights, conv weights, A_log, dt_bias).
struct Vector {
  DeviceBuffer buf;
  int64_t size = 0;
  const float* data() const { return buf.as<const float>(); }
};

// The ninfer_dtype of a code type (INT4, INT8, FP8_E4M3).
int32_t codes_dtype(QuantCodes c);

// Row-major codes (quant_weight.h) of `rows` rows of `row_bytes` moved into
// NINFER_QUANT_LAYOUT_TILES16 for code dtype `dtype` (rows a multiple of 16, row_bytes of whole
// 128-column pieces: ninfer_quant_tiles_fit). The loader does this where Backend::code_layout
// says the decode reads tiles.
std::vector<uint8_t> codes_in_tiles(const std::vector<uint8_t>& row_major, int64_t rows, int64_t row_bytes,
                                    int32_t dtype);

// On a dry-run backend (BackendOptions::plan_only) the loader allocates what a load would and
// reads no weight data: float tensors are sized from their headers, quantized modules from
// their layout (QuantRead::Layout: zero points and g_idx, never the codes).
class WeightLoader {
 public:
  // `extra_tensors`: tensors beyond the model's expected_tensors that the load reads (the MTP
  // head's), for the loading bar's total.
  WeightLoader(const Checkpoint& ck, Backend& backend, WeightPrecision precision, int64_t extra_tensors = 0);

  // One projection's weight: quantized as the checkpoint stores it, else in the precision
  // policy's dtype. Tensors must already have passed require_all().
  Matrix matrix(const std::string& name, const std::string& what);
  // The named projections (each [rows_i, cols], all the same cols) stacked by rows.
  Projection projection(std::initializer_list<std::string> names, const std::string& what);
  // As matrix(), always float32 (for ops whose activations and weights share a dtype); a
  // quantized tensor is dequantized.
  Matrix matrix_f32(const std::string& name, const std::string& what);
  // A token-embedding table: float only (the policy's dtype); a quantized one is an error.
  Matrix table(const std::string& name, const std::string& what);
  // A tensor flattened to float32.
  Vector vector(const std::string& name, const std::string& what);

  const Checkpoint& checkpoint() const { return ck_; }

 private:
  // The module's canonical matrix when the checkpoint stores it quantized (counted as loaded).
  std::optional<QuantizedMatrix> read_if_quantized(const std::string& name);
  Projection projection_parts(std::initializer_list<std::string> names, const std::string& what);
  // Sums the parts' rows and checks that they share their columns.
  static Projection finish_projection(Projection p, const std::string& what);
  Matrix stack(const std::vector<std::string>& names, const std::string& what, int32_t dtype);
  Matrix stack_quantized(std::vector<QuantizedMatrix>& parts, const std::string& what);
  Matrix upload_f32(const std::vector<float>& values, int64_t rows, int64_t cols, const std::string& what);
  int32_t storage_dtype(const std::vector<std::string>& names) const;
  // Synthetic checkpoints (Checkpoint::synthetic): values drawn from the seed instead of read
  // (synthetic_weights.cpp). Runs of names with the same quantization (or none) are one part.
  void fill_synthetic(const Matrix& m, size_t offset_bytes, const TensorView& t);
  std::vector<float> synthetic_values(const TensorView& t);
  Projection synthetic_projection(std::initializer_list<std::string> names, const std::string& what);
  Matrix synthetic_quantized(const std::vector<std::string>& names, const SyntheticQuant& q, const std::string& what);
  // fill_random of `count` elements of `dtype` at buf + offset (code dtypes: bytes; scale and
  // center unused).
  void fill_values(const DeviceBuffer& buf, size_t offset, int64_t count, int32_t dtype, uint64_t seed, float scale,
                   float center);
  std::unordered_map<std::string, ExpectedTensor> synthetic_specs_; // by name, made at first use
  // A loading bar on stderr (only on a terminal): a large checkpoint takes minutes to read.
  void count_loaded(const std::string& name);
  ProgressLine progress_;
  int64_t loaded_ = 0;

  const Checkpoint& ck_;
  Backend& backend_;
  WeightPrecision precision_;
  bool dry_; // backend_.plan_only()
};

} // namespace ninfer::models
