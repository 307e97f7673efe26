// Plain-language explanations of schema violations in a YAML file. valijson (behind
// load_validated_yaml) is the authority on whether a file is valid, but its messages name the
// enclosing object for an unknown key and never list an enum's values. When validation fails,
// this walks the same schema over the YAML tree and returns the first problem as
// "FILE:LINE: KEY: what was expected", with the closest known key for a misspelling.
// It understands the subset of JSON Schema the manifest uses: type, properties,
// additionalProperties: false, required, enum, minimum, maximum, exclusiveMinimum, minLength.
#pragma once

#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace ninfer {

// nullopt when this pass finds nothing wrong (the caller then keeps valijson's message).
std::optional<std::string> explain_schema_violation(const YAML::Node& root, const nlohmann::json& schema,
                                                    const std::string& origin);

} // namespace ninfer
