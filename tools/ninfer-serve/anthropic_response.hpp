// Replies in Anthropic's Messages API shapes: a message's content blocks (thinking, text,
// tool_use), the streamed events that build them, stop reasons, usage and errors.
//
// MessageBlocks turns a reply's text, as it streams, into content blocks: reasoning into a
// thinking block, the answer into text blocks, and (with tools) the calls ToolCallParser finds
// into tool_use blocks. Anthropic's `input` is an object, so a call is only sent once it is
// complete and its arguments parse as a JSON object (one input_json_delta with all of them);
// a call that does not is sent as text, as the model wrote it. The non-streamed message is the
// same blocks, built from the whole text, so a stream always reassembles to it.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "api_error.hpp"
#include "ninfer/serving/request_handle.hpp"
#include "ninfer/tokenizer/tokenizer.hpp"
#include "tool_calls.hpp"

namespace ninfer::tools {

class MessageBlocks {
 public:
  explicit MessageBlocks(std::optional<ToolCallOptions> tools);

  // The stream events (content_block_start, content_block_delta, content_block_stop) that a
  // piece of the reply's text completes; `reasoning`: the piece is thinking.
  std::vector<nlohmann::json> push(const std::string& text, bool reasoning);
  // The reply has ended: the events that close it.
  std::vector<nlohmann::json> finish();

  // The blocks so far, as a non-streamed message lists them.
  const nlohmann::json& content() const { return content_; }
  size_t tool_uses() const { return tool_uses_; }

 private:
  void open(const std::string& type, std::vector<nlohmann::json>& out);
  void close(std::vector<nlohmann::json>& out);
  void text(const std::string& type, const std::string& piece, std::vector<nlohmann::json>& out);
  void call_end(const std::string& raw, std::vector<nlohmann::json>& out);
  void handle(const std::vector<ToolCallEvent>& events, std::vector<nlohmann::json>& out);

  std::optional<ToolCallParser> parser_;
  nlohmann::json content_ = nlohmann::json::array();
  std::string open_; // type of the block being streamed ("text", "thinking"), or empty
  std::string call_name_, call_arguments_;
  size_t tool_uses_ = 0;
};

// A new tool_use id: "toolu_" and 24 random letters and digits.
std::string new_tool_use_id();

struct StopReason {
  std::string reason;                   // end_turn, max_tokens, stop_sequence or tool_use
  std::optional<std::string> sequence;  // stop_sequence: which one
};
// Why the reply ended. The engine reports "stop" for a stop token and a stop string alike;
// a stop string ends generation at the first token that completes it, so the one whose first
// occurrence in the generated text ends earliest is the one that matched (none: a stop token).
StopReason stop_reason(const serving::ServeResult& r, size_t tool_uses, const std::vector<std::string>& stop_sequences,
                       const Tokenizer* tokenizer);

// A reply's token counts: prompt tokens, those of them read from the slot (prompt reuse,
// docs/serving.md), generated tokens.
struct MessageUsage {
  int64_t prompt = 0, cached = 0, output = 0;
};
// Anthropic's usage object: input_tokens are the prompt tokens computed, cache_read_input_tokens
// those read from the slot (together the prompt), cache_creation_input_tokens 0 (no explicit
// cache_control breakpoints: every prompt stays in its slot for the next request).
nlohmann::json usage_json(const MessageUsage& u);
// The non-streamed message.
nlohmann::json message_json(const std::string& id, const std::string& model, const nlohmann::json& content,
                            const StopReason& stop, const MessageUsage& usage);
// The events around the content blocks: message_start (content empty, no stop reason yet, the
// whole prompt as input before the engine says what it read from a slot), message_delta (stop
// reason and the final usage) and message_stop.
nlohmann::json message_start_event(const std::string& id, const std::string& model, int64_t input_tokens);
nlohmann::json message_delta_event(const StopReason& stop, const MessageUsage& usage);
nlohmann::json message_stop_event();

// {"type": "error", "error": {"type", "message"}} and its HTTP status: the ApiError's status,
// except a prompt too long for the context (400, as Anthropic answers it) and a busy or
// stopping server (529, overloaded_error).
struct AnthropicError {
  int status;
  nlohmann::json body;
};
AnthropicError anthropic_error(const ApiError& e);

} // namespace ninfer::tools
