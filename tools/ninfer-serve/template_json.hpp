// JSON written as the chat template's `tojson` writes it. Hugging Face renders templates with
// `tojson` = Python's json.dumps(x, ensure_ascii=False): ", " and ": " separators, keys in the
// order the client sent them, non-ASCII characters as they are. The model saw its tools and
// past calls written this way in training, so the prompt must match it byte for byte.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace ninfer::tools {

// `value` as json.dumps(value, ensure_ascii=False) writes it. Numbers are written as
// nlohmann writes them (the shortest form that reads back: 1.5, 1e-05, 2.0), which is also
// Python's form except for doubles of 1e16 and more, which are not met in tool schemas.
std::string template_json(const nlohmann::ordered_json& value);

} // namespace ninfer::tools
