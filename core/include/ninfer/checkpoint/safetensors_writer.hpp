// Writes a safetensors file: the header for every tensor first, then each tensor's bytes,
// produced one at a time by a callback so a large file never has to sit in memory whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "ninfer/checkpoint/checkpoint.hpp"

namespace ninfer {

struct TensorSpec {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  size_t bytes() const;
};

// fill(i, dst) writes tensor i's little-endian bytes into dst (dst.size() == specs[i].bytes()).
using TensorFiller = std::function<void(size_t index, std::span<std::byte> dst)>;

// Data is laid out in the order of `specs`; the header is padded with spaces to a multiple of
// 8 bytes so every tensor starts 8-byte aligned. Throws ninfer::Error naming the file on I/O
// failure (disk full, ...).
void write_safetensors(const std::filesystem::path& file, const std::vector<TensorSpec>& specs,
                       const TensorFiller& fill,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

} // namespace ninfer
