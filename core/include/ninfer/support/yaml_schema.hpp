// Loading YAML files that have a JSON Schema in schemas/. Every problem is reported as
// "FILE:LINE: KEY: what was expected", whether it is a YAML syntax error or a schema violation.
#pragma once

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <string>

namespace ninfer {

// Parses `file` and validates it against the JSON Schema `schema_file`. Throws ninfer::Error.
YAML::Node load_validated_yaml(const std::filesystem::path& file,
                               const std::filesystem::path& schema_file);

// Same, for YAML text that did not come from a file (`origin` names it in messages).
YAML::Node parse_validated_yaml(const std::string& text, const std::string& origin,
                                const std::filesystem::path& schema_file);

// "FILE:LINE" for a node (line counted from 1), for messages about values the schema allows
// but the program refuses.
std::string where(const std::string& origin, const YAML::Node& node);

} // namespace ninfer
