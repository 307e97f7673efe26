// One standalone .safetensors file, memory-mapped: for data that is not a model checkpoint
// (the reference logits of tests/fixtures/*/reference.safetensors, tool outputs). Same parser
// and the same errors as Checkpoint; no config.json involved.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ninfer/checkpoint/checkpoint.hpp"

namespace ninfer {

class SafetensorsFile {
 public:
  // Maps and validates FILE. Throws ninfer::Error naming the file when it is missing or corrupt.
  static SafetensorsFile open(const std::filesystem::path& file);

  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile();

  const std::filesystem::path& path() const;
  bool has(const std::string& name) const;
  // Throws naming the tensor and the file when it is absent.
  const TensorView& tensor(const std::string& name) const;
  std::vector<std::string> names() const; // sorted

 private:
  struct Impl;
  explicit SafetensorsFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace ninfer
