// A Hugging Face checkpoint folder: config plus safetensors weights (single file or sharded
// with model.safetensors.index.json), memory-mapped, in F32 / BF16 / F16. Tensors are looked
// up by their checkpoint names; the weight prefix from the config tells text weights apart
// (model.visual.* and mtp.* are recognised and skipped). Every problem is an ninfer::Error
// naming the tensor or file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ninfer/checkpoint/model_config.hpp"

namespace ninfer {

enum class DType { F32, BF16, F16 };

const char* dtype_name(DType d);
size_t dtype_size(DType d);

struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr; // into the memory map; valid while the Checkpoint lives
  size_t bytes = 0;
  std::filesystem::path file;
  int64_t numel() const;
};

class Checkpoint {
 public:
  // Opens DIR: config.json, then the safetensors header(s). Data is mapped, not read.
  static Checkpoint open(const std::filesystem::path& dir);

  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;
  ~Checkpoint();

  const std::filesystem::path& dir() const;
  const ModelConfig& config() const;

  bool has(const std::string& name) const;
  // Throws naming the tensor (and the files searched) when missing.
  const TensorView& tensor(const std::string& name) const;
  // As tensor(), and checks the shape; the error states both shapes and where the expected
  // one comes from (config.json).
  const TensorView& require(const std::string& name, const std::vector<int64_t>& expected_shape) const;
  // Every tensor name in the checkpoint.
  std::vector<std::string> names() const;

 private:
  struct Impl;
  explicit Checkpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Converts any supported dtype to float32.
void to_f32(const TensorView& t, float* out);
std::vector<float> to_f32(const TensorView& t);

} // namespace ninfer
