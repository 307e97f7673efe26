// Loading YAML files that have a JSON Schema in schemas/. Every problem is reported as
// "FILE:LINE: KEY: what was expected", whether it is a YAML syntax error or a schema violation.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace ninfer {

// Limits on every YAML file read through here (manifests, arch data, schedule tables).
inline constexpr uint64_t kMaxYamlFileBytes = uint64_t{16} << 20;
inline constexpr size_t kMaxYamlScalarBytes = 65536;

// The text of a YAML file: an error naming it when it is missing, not a regular file or over
// kMaxYamlFileBytes.
std::string read_yaml_file(const std::filesystem::path& file);

// Parses YAML text and checks it holds no duplicate or non-scalar keys, no scalar over
// kMaxYamlScalarBytes, no nesting deeper than 64 and at most 200,000 nodes with aliases
// expanded. Throws ninfer::Error naming `origin`, the line and the key.
YAML::Node parse_yaml(const std::string& text, const std::string& origin);

// Parses `file` and validates it against the JSON Schema `schema_file`. Throws ninfer::Error.
YAML::Node load_validated_yaml(const std::filesystem::path& file,
                               const std::filesystem::path& schema_file);

// Same, for YAML text that did not come from a file (`origin` names it in messages).
YAML::Node parse_validated_yaml(const std::string& text, const std::string& origin,
                                const std::filesystem::path& schema_file);

// The JSON type a YAML scalar has under YAML 1.2's core schema, as validation resolves it:
// "integer", "number", "boolean", "null" or "string" (quoted scalars, and numbers too large for
// an int64 or a double, stay strings); "object" or "array" for a mapping or a list.
std::string yaml_scalar_type(const YAML::Node& n);

// At most `limit` characters of `s`, marked as cut, for quoting a value in a message.
std::string shortened_value(const std::string& s, size_t limit = 60);

// "FILE:LINE" for a node (line counted from 1), for messages about values the schema allows
// but the program refuses.
std::string where(const std::string& origin, const YAML::Node& node);

} // namespace ninfer
