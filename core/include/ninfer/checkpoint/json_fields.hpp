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

// Reads and parses a JSON file; throws ninfer::Error naming the file on I/O or syntax errors.
nlohmann::json read_json_file(const std::filesystem::path& file);

class JsonFields {
 public:
  // `path` is how the object is reached from the file's root ("" or "text_config").
  JsonFields(const nlohmann::json& obj, std::filesystem::path file, std::string path = "");

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
  const nlohmann::json* value(const std::string& key) const; // nullptr when absent/null
  const nlohmann::json& obj_;
  std::filesystem::path file_;
  std::string path_;
};

} // namespace ninfer
