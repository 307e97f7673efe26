#include "schema_explain.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "ninfer/support/yaml_schema.hpp"

namespace ninfer {
namespace {

// The JSON type a YAML scalar has under YAML 1.2's core schema, as load_validated_yaml
// resolves it before validation (quoted scalars stay strings).
std::string scalar_type(const YAML::Node& n) { return yaml_scalar_type(n); }

std::string describe(const YAML::Node& n) {
  if (n.IsMap()) return "a mapping";
  if (n.IsSequence()) return "a list";
  if (!n.IsScalar() || scalar_type(n) == "null") return "nothing";
  return fmt::format("'{}'", shortened_value(n.Scalar()));
}

std::string expected_type(const std::string& t) {
  if (t == "object") return "a mapping (indented `key: value` lines)";
  if (t == "integer") return "a whole number";
  if (t == "number") return "a number";
  if (t == "boolean") return "true or false";
  if (t == "string") return "a text value";
  return t;
}

// What one form of a oneOf takes: "auto", "a whole number >= 1".
std::string expected_form(const nlohmann::json& form) {
  if (form.contains("const")) return form["const"].is_string() ? form["const"].get<std::string>() : form["const"].dump();
  std::string s = form.contains("type") ? expected_type(form["type"].get<std::string>()) : "a value";
  if (form.contains("minimum")) s += " >= " + form["minimum"].dump();
  if (form.contains("exclusiveMinimum")) s += " > " + form["exclusiveMinimum"].dump();
  return s;
}

bool type_matches(const std::string& want, const std::string& got) {
  return want == got || (want == "number" && got == "integer");
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// Every key path the schema knows ("runtime.kv_dtype"), for suggestions across blocks.
void collect_keys(const nlohmann::json& schema, const std::string& prefix, std::vector<std::string>& out) {
  if (!schema.contains("properties")) return;
  for (const auto& [k, sub] : schema["properties"].items()) {
    out.push_back(prefix + k);
    collect_keys(sub, prefix + k + ".", out);
  }
}

std::string last_part(const std::string& path) {
  const auto dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

struct Walker {
  const nlohmann::json& root_schema;
  const std::string& origin;

  std::string at(const YAML::Node& n, const std::string& key) const {
    return fmt::format("{}: {}", where(origin, n), key.empty() ? "(document)" : key);
  }

  std::string unknown_key(const YAML::Node& key_node, const std::string& prefix, const std::string& key,
                          const nlohmann::json& props) const {
    std::vector<std::string> here;
    for (const auto& [k, sub] : props.items()) here.push_back(k);
    std::string hint;
    // A misspelling of a key at this level...
    size_t best = std::max<size_t>(2, key.size() / 3) + 1; // up to 2 edits, more for long keys
    for (const auto& k : here) {
      const size_t d = edit_distance(key, k);
      if (d < best) {
        best = d;
        hint = fmt::format("; did you mean '{}'?", prefix + k);
      }
    }
    // ...or a key that belongs in another block.
    if (hint.empty()) {
      std::vector<std::string> all;
      collect_keys(root_schema, "", all);
      for (const auto& p : all) {
        if (last_part(p) == key && p != prefix + key) {
          const auto dot = p.rfind('.');
          hint = dot == std::string::npos ? fmt::format("; '{}' is a top-level key", key)
                                          : fmt::format("; '{}' belongs under '{}:'", key, p.substr(0, dot));
          break;
        }
      }
    }
    return fmt::format("{}: unknown key{} (known keys here: {})", at(key_node, prefix + shortened_value(key)), hint,
                       fmt::join(here, ", "));
  }

  std::optional<std::string> walk(const YAML::Node& n, const nlohmann::json& schema, const std::string& path,
                                  const YAML::Node& key_node) const {
    const std::string& key = path;
    // Report on the key's line: an empty value's own mark points past it, and a block
    // value starts on the next line.
    const YAML::Node& located = key_node.Mark().line >= 0 ? key_node : n;
    if (schema.contains("oneOf")) { // a value of several forms (kv_capacity: a number or auto)
      std::vector<std::string> forms;
      for (const auto& alt : schema["oneOf"]) {
        if (!walk(n, alt, path, key_node)) return std::nullopt;
        forms.push_back(expected_form(alt));
      }
      return fmt::format("{}: expected {}, got {}", at(located, key), fmt::join(forms, " or "), describe(n));
    }
    if (schema.contains("const")) {
      const std::string want = schema["const"].is_string() ? schema["const"].get<std::string>() : schema["const"].dump();
      if (!n.IsScalar() || n.Scalar() != want)
        return fmt::format("{}: expected {}, got {}", at(located, key), want, describe(n));
    }
    if (schema.contains("type")) {
      const std::string want = schema["type"];
      const std::string got = scalar_type(n);
      if (!type_matches(want, got))
        return fmt::format("{}: expected {}, got {}", at(located, key), expected_type(want), describe(n));
    }
    if (schema.contains("enum")) {
      std::vector<std::string> allowed;
      for (const auto& v : schema["enum"]) allowed.push_back(v.is_string() ? v.get<std::string>() : v.dump());
      bool ok = false;
      if (n.IsScalar())
        for (const auto& v : schema["enum"]) ok = ok || (v.is_string() && v.get<std::string>() == n.Scalar());
      if (!ok)
        return fmt::format("{}: expected one of {}, got {}", at(located, key), fmt::join(allowed, ", "),
                           describe(n));
    }
    if (n.IsScalar() && (scalar_type(n) == "integer" || scalar_type(n) == "number")) {
      const double v = std::strtod(n.Scalar().c_str(), nullptr);
      if (schema.contains("minimum") && v < schema["minimum"].get<double>())
        return fmt::format("{}: expected a value >= {}, got {}", at(located, key), schema["minimum"].dump(),
                           describe(n));
      if (schema.contains("exclusiveMinimum") && v <= schema["exclusiveMinimum"].get<double>())
        return fmt::format("{}: expected a value > {}, got {}", at(located, key),
                           schema["exclusiveMinimum"].dump(), describe(n));
      if (schema.contains("maximum") && v > schema["maximum"].get<double>())
        return fmt::format("{}: expected a value <= {}, got {}", at(located, key), schema["maximum"].dump(),
                           describe(n));
    }
    if (n.IsScalar() && schema.contains("minLength") && n.Scalar().size() < schema["minLength"].get<size_t>())
      return fmt::format("{}: expected a non-empty value", at(located, key));
    if (!n.IsMap() || !schema.contains("properties")) return std::nullopt;

    const nlohmann::json& props = schema["properties"];
    const bool closed = schema.contains("additionalProperties") && schema["additionalProperties"] == false;
    const std::string prefix = path.empty() ? "" : path + ".";
    for (const auto& kv : n) {
      const std::string k = kv.first.as<std::string>();
      if (!props.contains(k)) {
        if (closed) return unknown_key(kv.first, prefix, k, props);
        continue;
      }
      if (auto problem = walk(kv.second, props[k], prefix + k, kv.first)) return problem;
    }
    if (schema.contains("required")) {
      for (const auto& r : schema["required"]) {
        const std::string k = r;
        if (n[k]) continue;
        const std::string what = props.contains(k) && props[k].contains("description")
                                     ? ": " + props[k]["description"].get<std::string>()
                                     : "";
        return fmt::format("{}: required key missing{}", at(located, prefix + k), what);
      }
    }
    return std::nullopt;
  }
};

} // namespace

std::optional<std::string> explain_schema_violation(const YAML::Node& root, const nlohmann::json& schema,
                                                    const std::string& origin) {
  Walker w{schema, origin};
  if ((!root.IsDefined() || root.IsNull()) && schema.contains("required")) {
    std::vector<std::string> required;
    for (const auto& r : schema["required"]) required.push_back(r);
    return fmt::format("{}:1: {}: the file is empty; it needs at least: {}", origin, required.front(),
                       fmt::join(required, ", "));
  }
  return w.walk(root, schema, "", root);
}

} // namespace ninfer
