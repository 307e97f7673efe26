// Request bodies read into JSON for the API parsers (OpenAI and Anthropic alike).
//
// Objects keep their keys in the order the client sent them: tool definitions and call
// arguments go into the prompt as the chat template writes them, and it writes keys in that
// order (template_json.hpp). Keys are appended as they come, so a body with a huge object costs
// linear time (nlohmann's own ordered parser searches the object for every key); a repeated key
// keeps its first place and its last value, as Python's json.loads does.
#pragma once

#include <nlohmann/json.hpp>

#include <limits>
#include <optional>
#include <string>

namespace ninfer {
struct SamplingParams;
}

namespace ninfer::tools {

using RequestJson = nlohmann::ordered_json;

// Malformed JSON is an ApiError (400); a number that does not fit a double (1e999) is a 400
// naming where it is (`messages[0].content`).
RequestJson parse_request_body(const std::string& text);

// A field that is absent or null counts as not given, as in OpenAI's and Anthropic's APIs.
const RequestJson* request_field(const RequestJson& object, const char* key);

// A number field within [lo, hi], or nullopt when absent; anything else is a 400 naming `key`.
std::optional<double> request_number(const RequestJson& object, const char* key,
                                     double lo = -std::numeric_limits<double>::infinity(),
                                     double hi = std::numeric_limits<double>::infinity());

// SamplingParams::validate() as a 400 naming the request's field (the names are the APIs').
void validate_sampling(const SamplingParams& sampling);

} // namespace ninfer::tools
