#include "ninfer/checkpoint/json_fields.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "ninfer/support/error.hpp"

namespace ninfer {

nlohmann::json read_json_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot read {}", file.string()));
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON ({}); the file is damaged or not a Hugging Face "
                            "checkpoint file",
                            file.string(), e.what()));
  }
}

JsonFields::JsonFields(const nlohmann::json& obj, std::filesystem::path file, std::string path)
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

const nlohmann::json* JsonFields::value(const std::string& key) const {
  auto it = obj_.find(key);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool JsonFields::has(const std::string& key) const { return value(key) != nullptr; }

JsonFields JsonFields::child(const std::string& key) const {
  const nlohmann::json* v = value(key);
  if (!v) fail(key, "is missing");
  if (!v->is_object()) fail(key, fmt::format("must be an object, got {}", v->type_name()));
  return JsonFields(*v, file_, key_path(key));
}

std::optional<int64_t> JsonFields::opt_integer(const std::string& key) const {
  const nlohmann::json* v = value(key);
  if (!v) return std::nullopt;
  if (v->is_number_integer()) return v->get<int64_t>();
  // 1e6-style floats that hold a whole number are accepted: some exporters write them.
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (d == static_cast<double>(static_cast<int64_t>(d))) return static_cast<int64_t>(d);
  }
  fail(key, fmt::format("must be an integer, got {}", v->dump()));
}

int64_t JsonFields::integer(const std::string& key) const {
  auto v = opt_integer(key);
  if (!v) fail(key, "is missing (an integer is required)");
  return *v;
}

std::optional<double> JsonFields::opt_number(const std::string& key) const {
  const nlohmann::json* v = value(key);
  if (!v) return std::nullopt;
  if (!v->is_number()) fail(key, fmt::format("must be a number, got {}", v->dump()));
  return v->get<double>();
}

double JsonFields::number(const std::string& key) const {
  auto v = opt_number(key);
  if (!v) fail(key, "is missing (a number is required)");
  return *v;
}

std::optional<bool> JsonFields::opt_boolean(const std::string& key) const {
  const nlohmann::json* v = value(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) fail(key, fmt::format("must be true or false, got {}", v->dump()));
  return v->get<bool>();
}

std::optional<std::string> JsonFields::opt_string(const std::string& key) const {
  const nlohmann::json* v = value(key);
  if (!v) return std::nullopt;
  if (!v->is_string()) fail(key, fmt::format("must be a string, got {}", v->dump()));
  return v->get<std::string>();
}

std::optional<std::vector<std::string>> JsonFields::opt_strings(const std::string& key) const {
  const nlohmann::json* v = value(key);
  if (!v) return std::nullopt;
  if (!v->is_array()) fail(key, fmt::format("must be a list of strings, got {}", v->type_name()));
  std::vector<std::string> out;
  for (const auto& e : *v) {
    if (!e.is_string()) fail(key, fmt::format("must be a list of strings; element {} is not", e.dump()));
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::vector<int64_t> JsonFields::int_or_ints(const std::string& key) const {
  const nlohmann::json* v = value(key);
  if (!v) return {};
  if (v->is_number_integer()) return {v->get<int64_t>()};
  if (!v->is_array()) fail(key, fmt::format("must be an integer or a list of integers, got {}", v->dump()));
  std::vector<int64_t> out;
  for (const auto& e : *v) {
    if (!e.is_number_integer())
      fail(key, fmt::format("must be an integer or a list of integers; element {} is not", e.dump()));
    out.push_back(e.get<int64_t>());
  }
  return out;
}

} // namespace ninfer
