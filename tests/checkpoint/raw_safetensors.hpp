// The checkpoint tests' own safetensors reading and writing, written from the format's
// description (8-byte little-endian header length, JSON header, data) and independent of
// core/checkpoint, so a bug there cannot hide itself. Also temp folders and JSON files.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "temp_dir.hpp"

namespace ninfer::test {

struct RawTensor {
  std::string dtype; // "F32", "BF16", "F16", "F64", ...
  std::vector<int64_t> shape;
  std::string bytes;
};
using RawTensors = std::map<std::string, RawTensor>;

// Reads every tensor of a well-formed file.
RawTensors read_raw_safetensors(const std::filesystem::path& file);
// Writes tensors in `order` (default: name order) with sequential offsets.
void write_raw_safetensors(const std::filesystem::path& file, const RawTensors& tensors,
                           const std::vector<std::string>& order = {});
// Writes [header_len][header][data]; header_len defaults to header.size().
void write_raw_file(const std::filesystem::path& file, const std::string& header, const std::string& data,
                    int64_t header_len = -1);

std::string read_file_bytes(const std::filesystem::path& file);
void write_file_bytes(const std::filesystem::path& file, const std::string& bytes);
nlohmann::json read_json(const std::filesystem::path& file);
void write_json(const std::filesystem::path& file, const nlohmann::json& j);

// Copies config.json (+ generation_config.json) of a fixture into dir.
void copy_fixture_config(const std::string& fixture, const std::filesystem::path& dir);

} // namespace ninfer::test
