// Typed access to one JSON object of a checkpoint file (config.json, its text_config, ...)
// whose errors name the file and the full key path, so a user can find the line to fix. The
// config reader and each model family's own config keys (ninfer/checkpoint/model_family.hpp)
// read through it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ninfer {

// A checkpoint's JSON as parsed: objects keep the file's key order, because some lists are
// ordered by meaning (GPTQ's `dynamic` rules and compressed-tensors' `config_groups`: the first
// one a module matches decides).
using ConfigJson = nlohmann::ordered_json;

// Limits on a checkpoint's JSON files, checked before anything is parsed.
inline constexpr uint64_t kMaxConfigJsonBytes = uint64_t{16} << 20;  // config.json, generation_config.json
inline constexpr uint64_t kMaxIndexJsonBytes = uint64_t{64} << 20;   // model.safetensors.index.json
inline constexpr int kMaxJsonDepth = 64;
// Every integer of a config file: larger values are mistakes, and keeping them below 2^31
// keeps products of two (a matrix's element count) far from overflowing.
inline constexpr int64_t kMaxConfigInteger = 2147483647;

// Reads and parses a JSON file of at most `max_bytes` that must be a regular file nested at
// most kMaxJsonDepth deep; throws ninfer::Error naming the file on I/O, size or syntax errors.
ConfigJson read_json_file(const std::filesystem::path& file, uint64_t max_bytes = kMaxConfigJsonBytes);

// The byte offset where `text` opens its (max_depth+1)-th nested array or object, if it does
// (a scan that respects strings; parsing and printing such a document recurse that deep).
std::optional<size_t> json_too_deep(const char* text, size_t size, int max_depth);

// A value for a message: its JSON text, cut after `limit` characters.
std::string shown(const ConfigJson& v, size_t limit = 60);

class JsonFields {
 public:
  // `path` is how the object is reached from the file's root ("" or "text_config").
  JsonFields(const ConfigJson& obj, std::filesystem::path file, std::string path = "");
  // Any other JSON type would bind through a temporary copy that dies before the fields are read.
  template <class Other>
  JsonFields(const Other& obj, std::filesystem::path file, std::string path = "") = delete;

  bool has(const std::string& key) const; // present and not null
  JsonFields child(const std::string& key) const; // a nested object (error if not an object)

  int64_t integer(const std::string& key) const;
  std::optional<int64_t> opt_integer(const std::string& key) const;
  double number(const std::string& key) const;
  std::optional<double> opt_number(const std::string& key) const;
  std::optional<bool> opt_boolean(const std::string& key) const;
  std::optional<std::string> opt_string(const std::string& key) const;
  std::optional<std::vector<std::string>> opt_strings(const std::string& key) const;
  // An int or a list of ints (eos_token_id); empty when absent or null.
  std::vector<int64_t> int_or_ints(const std::string& key) const;

  const std::filesystem::path& file() const { return file_; }
  std::string key_path(const std::string& key) const;
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;

 private:
  const ConfigJson* value(const std::string& key) const; // nullptr when absent/null
  std::optional<int64_t> bounded_integer(const ConfigJson& v, const std::string& key) const;
  const ConfigJson& obj_;
  std::filesystem::path file_;
  std::string path_;
};

} // namespace ninfer
