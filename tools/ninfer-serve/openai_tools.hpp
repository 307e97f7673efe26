// OpenAI's tool fields in a chat request: `tools`, `tool_choice`, `parallel_tool_calls`, and an
// assistant message's `tool_calls`. Problems are 400s naming the field.
#pragma once

#include <vector>

#include "ninfer/tokenizer/chat_format.hpp"
#include "request_json.hpp"
#include "tool_choice.hpp"

namespace ninfer::tools {

ToolSetup parse_openai_tools(const RequestJson& body);

// messages[i].tool_calls: [{"id", "type": "function", "function": {"name", "arguments"}}]
// (`arguments` a JSON string, written into the prompt as it is; an object is written as the
// template's tojson writes it). `param` is "messages[i].tool_calls".
std::vector<ChatToolCall> parse_openai_tool_calls(const RequestJson& calls, const std::string& param);

} // namespace ninfer::tools
