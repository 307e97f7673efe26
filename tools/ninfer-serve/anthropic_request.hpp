// Parsing of Anthropic Messages API bodies (POST /v1/messages and /v1/messages/count_tokens)
// into the same ParsedRequest the OpenAI routes submit. The conversation maps onto the Qwen
// chat template: `system` first; text blocks as turn text; an assistant's `thinking` blocks as
// its reasoning and `tool_use` blocks as its tool calls; a user's `tool_result` blocks as
// `tool` turns (<tool_response> blocks), in the order written. Anthropic tools become the
// template's function entries ({"type": "function", "function": {"name", "description",
// "parameters": input_schema}}). Every problem is an ApiError (400) naming the field; the
// route writes it in Anthropic's error shape.
#pragma once

#include <string>
#include <vector>

#include "loaded_model.hpp"
#include "openai_request.hpp"

namespace ninfer::tools {

struct MessagesRequest {
  ParsedRequest request;                   // n = 1; max_tokens_field "max_tokens"
  std::vector<std::string> stop_sequences; // the client's, to name the one that stopped a reply
};

// `count_only`: /v1/messages/count_tokens (no max_tokens, no sampling fields).
MessagesRequest parse_messages_request(const std::string& body, const LoadedModel& model, bool count_only);

} // namespace ninfer::tools
