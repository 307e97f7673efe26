// A Hugging Face checkpoint folder: config plus safetensors weights (single file or sharded
// with model.safetensors.index.json), memory-mapped, in F32 / BF16 / F16. Tensors are looked
// up by their checkpoint names; the weight prefix from the config tells text weights apart
// (model.visual.* and mtp.* are recognised and skipped). Every problem is an ninfer::Error
// naming the tensor or file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ninfer/checkpoint/model_config.hpp"

namespace ninfer {

// Float tensors, and the element types of quantized weights' packed tensors (GPTQ / AWQ /
// compressed-tensors int32 words, compressed-tensors' int64 weight_shape, FP8 e4m3 codes).
enum class DType { F32, BF16, F16, I32, I64, F8_E4M3 };

const char* dtype_name(DType d); // safetensors spelling: "F32", "BF16", "F16", "I32", "I64", "F8_E4M3"
size_t dtype_size(DType d);
// The dtypes a checkpoint may hold, for messages: "F32, BF16, F16, I32, I64, F8_E4M3".
const char* readable_dtypes();

struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  // Into the memory map; valid while the Checkpoint lives. safetensors does not promise
  // alignment, so read it with memcpy (or to_f32), never through a cast float*.
  const void* data = nullptr;
  size_t bytes = 0;
  std::filesystem::path file;
  int64_t numel() const;
};

// "[151936, 256]"
std::string shape_string(const std::vector<int64_t>& shape);

// The code type of a quantized matrix (ninfer/abi/ops/quant_weight.h).
enum class QuantCodes { Int4, Int8, Fp8E4M3 };

// A synthetic checkpoint's quantized matrix: codes and scales drawn on the device (the codes of
// uniform random weights quantized to nearest), symmetric, no g_idx, BF16 scales [N, ceil(K/g)].
struct SyntheticQuant {
  QuantCodes codes = QuantCodes::Int4;
  int64_t group_size = 128; // K: one group per row
};

class Checkpoint {
 public:
  // Opens DIR: config.json, then the safetensors header(s). Data is mapped, not read.
  // On a terminal (stderr is a TTY) a one-line progress indicator shows the shards.
  static Checkpoint open(const std::filesystem::path& dir);
  // A checkpoint with no files (benchmarks): every tensor `config` implies, in `dtype`, with
  // no data (TensorView::data is null). Model loaders draw its values on the backend from
  // `seed` (models/weights.cpp), so a 27B-parameter shape needs neither disk nor bus.
  // `quantized` names the linear weights that are quantized instead (ninfer-bench --weights).
  static Checkpoint synthetic(const ModelConfig& config, DType dtype, uint64_t seed,
                              std::map<std::string, SyntheticQuant> quantized = {});
  // Set for synthetic checkpoints: the seed their values come from.
  std::optional<uint64_t> synthetic_seed() const;
  // A synthetic checkpoint's quantization of tensor `name`, or null (float, or not synthetic).
  const SyntheticQuant* synthetic_quant(const std::string& name) const;

  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;
  ~Checkpoint();

  const std::filesystem::path& dir() const;
  // The config; its weight_prefix is corrected to what the tensors use when a flat config
  // ships text weights under model.language_model.* (or the reverse).
  const ModelConfig& config() const;

  // True for tensors that can be read (an auxiliary tensor of an unreadable dtype is listed by
  // names() but has() is false).
  bool has(const std::string& name) const;
  // Throws naming the tensor (and the files searched) when missing.
  const TensorView& tensor(const std::string& name) const;
  // As tensor(), and checks the shape; the error states both shapes and where the expected
  // one comes from (config.json).
  const TensorView& require(const std::string& name, const std::vector<int64_t>& expected_shape) const;
  // As above; `origin` says how the expected shape follows from the config, for the message
  // (e.g. "[num_attention_heads*head_dim*2, hidden_size] from config.json").
  const TensorView& require(const std::string& name, const std::vector<int64_t>& expected_shape,
                            const std::string& origin) const;
  // Every tensor name in the checkpoint, sorted (auxiliary ones included).
  std::vector<std::string> names() const;
  // The safetensors files, in index order.
  const std::vector<std::filesystem::path>& files() const;
  // Bytes of tensor data over all files.
  size_t data_bytes() const;

  // Tensors that belong to parts of the model ninfer does not run (vision tower
  // model.visual.*, multi-token-prediction head mtp.*): listed, never required.
  static bool is_auxiliary(const std::string& name);

 private:
  struct Impl;
  explicit Checkpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Converts a float dtype (F32, BF16, F16, F8_E4M3) to float32, exactly: every such value is a
// float. An integer tensor is an error naming it.
void to_f32(const TensorView& t, float* out);
std::vector<float> to_f32(const TensorView& t);
// Elements [first, first + count) of the flattened tensor (e.g. one embedding row).
void to_f32(const TensorView& t, int64_t first, int64_t count, float* out);

// Scalar conversions used by to_f32 (IEEE binary16 with subnormals, Inf and NaN; bfloat16 is
// the top half of a float32).
float f16_to_f32(uint16_t h);
float bf16_to_f32(uint16_t b);
// OCP float8 e4m3fn: 4 exponent bits (bias 7), 3 mantissa bits, no infinities, 0x7f/0xff NaN.
float e4m3_to_f32(uint8_t b);
// Round to nearest even, for writers (ninfer-make-checkpoint); NaN stays NaN.
uint16_t f32_to_bf16(float f);

} // namespace ninfer
