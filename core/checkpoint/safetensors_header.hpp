// Parses and validates the header of one mapped safetensors file: 8-byte little-endian
// header length, a JSON object {name: {dtype, shape, data_offsets}}, then the data section.
// Every structural problem is an ninfer::Error "truncated or corrupt file X: ...".
#pragma once

#include <string>
#include <vector>

#include "mapped_file.hpp"
#include "ninfer/checkpoint/checkpoint.hpp"

namespace ninfer::checkpoint_detail {

// A tensor whose dtype ninfer does not read, kept only so it can be listed and named in
// errors (allowed for auxiliary tensors: the vision tower and MTP head are never loaded).
struct UnreadableTensor {
  std::string name;
  std::string dtype;
  std::filesystem::path file;
};

struct SafetensorsContents {
  std::vector<TensorView> tensors; // data points into the mapping
  std::vector<UnreadableTensor> unreadable;
  size_t data_bytes = 0;
};

SafetensorsContents parse_safetensors(const MappedFile& file);
// The same for bytes already in memory (`path` names them in messages); TensorView::data
// points into `data`.
SafetensorsContents parse_safetensors(const unsigned char* data, size_t size, const std::filesystem::path& path);

} // namespace ninfer::checkpoint_detail
