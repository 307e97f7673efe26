// Weights on the backend, and the loader that puts them there from a Checkpoint: dtype policy
// (WeightPrecision), row-stacking of projections that run as one matrix (q|k|v, gate|up,
// qkv|z), and shape checks that name the tensor.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <unordered_map>
#include <vector>

#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/checkpoint/expected_tensors.hpp"
#include "ninfer/checkpoint/progress.hpp"
#include "ninfer/models/causal_lm.hpp"
#include "ninfer/runtime/backend.hpp"

namespace ninfer::models {

// A [rows, cols] matrix for the linear / embedding ops, in F32 or BF16.
struct Matrix {
  DeviceBuffer buf;
  int32_t dtype = 0; // ninfer_dtype
  int64_t rows = 0, cols = 0;
};

// A float32 vector or small tensor (norm weights, conv weights, A_log, dt_bias).
struct Vector {
  DeviceBuffer buf;
  int64_t size = 0;
  const float* data() const { return buf.as<const float>(); }
};

class WeightLoader {
 public:
  WeightLoader(const Checkpoint& ck, Backend& backend, WeightPrecision precision);

  // The named tensors (each [rows_i, cols], all the same cols) stacked by rows into one matrix
  // in the precision policy's dtype. Tensors must already have passed require_all().
  Matrix matrix(std::initializer_list<std::string> names, const std::string& what);
  // As matrix(), always float32 (for ops whose activations and weights share a dtype).
  Matrix matrix_f32(std::initializer_list<std::string> names, const std::string& what);
  // A tensor flattened to float32.
  Vector vector(const std::string& name, const std::string& what);

  const Checkpoint& checkpoint() const { return ck_; }

 private:
  Matrix stack(std::initializer_list<std::string> names, const std::string& what, int32_t dtype);
  int32_t storage_dtype(std::initializer_list<std::string> names) const;
  // Synthetic checkpoints (Checkpoint::synthetic): values drawn from the seed instead of read.
  void fill_synthetic(const Matrix& m, size_t offset_bytes, const TensorView& t);
  std::vector<float> synthetic_values(const TensorView& t);
  std::unordered_map<std::string, ExpectedTensor> synthetic_specs_; // by name, made at first use
  // A loading bar on stderr (only on a terminal): a large checkpoint takes minutes to read.
  void count_loaded(const std::string& name);
  ProgressLine progress_;
  int64_t loaded_ = 0;

  const Checkpoint& ck_;
  Backend& backend_;
  WeightPrecision precision_;
};

} // namespace ninfer::models
