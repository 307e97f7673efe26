#include "ninfer/checkpoint/json_fields.hpp"

#include <fmt/format.h>

#include <cmath>

#include "ninfer/support/bounded_file.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer {

std::optional<size_t> json_too_deep(const char* text, size_t size, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < size; ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::nullopt;
}

std::string shown(const ConfigJson& v, size_t limit) {
  std::string s = v.dump(-1, ' ', false, ConfigJson::error_handler_t::replace);
  if (s.size() <= limit) return s;
  return fmt::format("{}... ({} characters)", s.substr(0, limit), s.size());
}

ConfigJson read_json_file(const std::filesystem::path& file, uint64_t max_bytes) {
  const std::string text = read_bounded_file(file, max_bytes, file.filename().string());
  if (auto at = json_too_deep(text.data(), text.size(), kMaxJsonDepth))
    throw Error(fmt::format("{}: nested deeper than {} levels (at byte {}); the file is damaged or not a Hugging "
                            "Face checkpoint file",
                            file.string(), kMaxJsonDepth, *at));
  try {
    return ConfigJson::parse(text);
  } catch (const ConfigJson::exception& e) {
    throw Error(fmt::format("{}: not valid JSON ({}); the file is damaged or not a Hugging Face "
                            "checkpoint file",
                            file.string(), e.what()));
  }
}

JsonFields::JsonFields(const ConfigJson& obj, std::filesystem::path file, std::string path)
    : obj_(obj), file_(std::move(file)), path_(std::move(path)) {
  if (!obj_.is_object())
    throw Error(fmt::format("{}: {} must be a JSON object", file_.string(),
                            path_.empty() ? std::string("the top level") : "key '" + path_ + "'"));
}

std::string JsonFields::key_path(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

void JsonFields::fail(const std::string& key, const std::string& what) const {
  throw Error(fmt::format("{}: key '{}' {}", file_.string(), key_path(key), what));
}

const ConfigJson* JsonFields::value(const std::string& key) const {
  auto it = obj_.find(key);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool JsonFields::has(const std::string& key) const { return value(key) != nullptr; }

JsonFields JsonFields::child(const std::string& key) const {
  const ConfigJson* v = value(key);
  if (!v) fail(key, "is missing");
  if (!v->is_object()) fail(key, fmt::format("must be an object, got {}", v->type_name()));
  return JsonFields(*v, file_, key_path(key));
}

// A whole number within +-kMaxConfigInteger (an error beyond), nullopt for anything else.
// 1e6-style floats that hold a whole number are accepted: some exporters write them.
std::optional<int64_t> JsonFields::bounded_integer(const ConfigJson& v, const std::string& key) const {
  double d;
  if (v.is_number_unsigned()) d = static_cast<double>(v.get<uint64_t>());
  else if (v.is_number_integer()) d = static_cast<double>(v.get<int64_t>());
  else if (v.is_number_float()) d = v.get<double>();
  else return std::nullopt;
  if (!(d >= -static_cast<double>(kMaxConfigInteger) - 1 && d <= static_cast<double>(kMaxConfigInteger)))
    fail(key, fmt::format("is {}, outside the range a config value may take ({} to {})", shown(v),
                          -kMaxConfigInteger - 1, kMaxConfigInteger));
  if (v.is_number_integer()) return v.get<int64_t>();
  if (d != std::trunc(d)) return std::nullopt;
  return static_cast<int64_t>(d);
}

std::optional<int64_t> JsonFields::opt_integer(const std::string& key) const {
  const ConfigJson* v = value(key);
  if (!v) return std::nullopt;
  if (auto i = bounded_integer(*v, key)) return *i;
  fail(key, fmt::format("must be an integer, got {}", shown(*v)));
}

int64_t JsonFields::integer(const std::string& key) const {
  auto v = opt_integer(key);
  if (!v) fail(key, "is missing (an integer is required)");
  return *v;
}

std::optional<double> JsonFields::opt_number(const std::string& key) const {
  const ConfigJson* v = value(key);
  if (!v) return std::nullopt;
  if (!v->is_number()) fail(key, fmt::format("must be a number, got {}", shown(*v)));
  return v->get<double>();
}

double JsonFields::number(const std::string& key) const {
  auto v = opt_number(key);
  if (!v) fail(key, "is missing (a number is required)");
  return *v;
}

std::optional<bool> JsonFields::opt_boolean(const std::string& key) const {
  const ConfigJson* v = value(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) fail(key, fmt::format("must be true or false, got {}", shown(*v)));
  return v->get<bool>();
}

std::optional<std::string> JsonFields::opt_string(const std::string& key) const {
  const ConfigJson* v = value(key);
  if (!v) return std::nullopt;
  if (!v->is_string()) fail(key, fmt::format("must be a string, got {}", shown(*v)));
  return v->get<std::string>();
}

std::optional<std::vector<std::string>> JsonFields::opt_strings(const std::string& key) const {
  const ConfigJson* v = value(key);
  if (!v) return std::nullopt;
  if (!v->is_array()) fail(key, fmt::format("must be a list of strings, got {}", v->type_name()));
  std::vector<std::string> out;
  for (const auto& e : *v) {
    if (!e.is_string()) fail(key, fmt::format("must be a list of strings; element {} is not", shown(e)));
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::vector<int64_t> JsonFields::int_or_ints(const std::string& key) const {
  const ConfigJson* v = value(key);
  if (!v) return {};
  if (v->is_number_integer()) return {*bounded_integer(*v, key)};
  if (!v->is_array()) fail(key, fmt::format("must be an integer or a list of integers, got {}", shown(*v)));
  std::vector<int64_t> out;
  for (const auto& e : *v) {
    if (!e.is_number_integer())
      fail(key, fmt::format("must be an integer or a list of integers; element {} is not", shown(e)));
    out.push_back(*bounded_integer(e, key));
  }
  return out;
}

} // namespace ninfer
