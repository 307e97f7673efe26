// Response bodies in OpenAI's shapes: whole completions and streamed chunks, for both the
// chat and the legacy completions endpoint.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ninfer/serving/request_handle.hpp"
#include "ninfer/tokenizer/tokenizer.hpp"
#include "openai_request.hpp"
#include "tool_calls.hpp"

namespace ninfer::tools {

struct ResponseMeta {
  Endpoint endpoint;
  std::string id;    // "chatcmpl-..." / "cmpl-..."
  std::string model;
  int64_t created;   // unix seconds
  bool logprobs = false;  // the request asked for logprobs
  bool reasoning = false; // chat with thinking: the message has reasoning_content
  const Tokenizer* tokenizer = nullptr; // token text in logprobs (null: "token_id:N")
  int64_t top_logprobs = 0;               // alternatives per token the request asked for
  // Completions with `echo`: the prompt, whose text (and, with logprobs, tokens) come first.
  std::optional<std::vector<int32_t>> echo_prompt;
  // Chat with tools (ToolSetup::active): calls are read from the answer (tool_calls.hpp).
  std::optional<ToolCallOptions> tools;
};

// A new tool call id: "call_" and 24 random letters and digits, as OpenAI's look.
std::string new_tool_call_id();

// A choice's finish_reason: "tool_calls" for a reply that ended of itself with calls in it
// (one cut by max_tokens stays "length").
std::string chat_finish_reason(const std::string& finish_reason, size_t calls);

// Logprobs of `ids` in the endpoint's shape: chat {"content": [{token, logprob, bytes,
// top_logprobs}]}, completions {tokens, token_logprobs, top_logprobs, text_offset}.
// `text_offset` is where the first token's text starts in the completion; it is advanced past
// the tokens (streams carry it from chunk to chunk).
nlohmann::json logprobs_json(const ResponseMeta& m, std::span<const int32_t> ids, std::span<const float> logprobs,
                             std::span<const std::vector<TokenLogprob>> top, int64_t& text_offset);

ResponseMeta new_response_meta(Endpoint endpoint, const std::string& model);

// Usage of a request's choices (`n` of them, one result each): the prompt counted once, the
// completion tokens of every choice added up, as OpenAI counts them.
nlohmann::json usage_json(std::span<const serving::ServeResult> choices);
nlohmann::json completion_json(const ResponseMeta& m, std::span<const serving::ServeResult> choices, bool token_ids);

// One streamed chunk carrying `text` for choice `index` (chat: as delta.reasoning_content
// when `reasoning`); the first chat chunk of a choice also says the role.
nlohmann::json text_chunk(const ResponseMeta& m, const std::string& text, bool first, bool reasoning = false,
                          int64_t index = 0);
// A streamed completion's echo of its prompt (ResponseMeta::echo_prompt), the first chunk of
// choice `index`: the prompt's text and, given its scores, its legacy logprobs (text_offset
// runs on into the completion's).
nlohmann::json echo_chunk(const ResponseMeta& m, int64_t index, const serving::PromptScores* scores,
                          int64_t& text_offset);
// Streamed tool calls, as OpenAI sends them: a chunk that opens call `call` of choice `index`
// with its id, type and name (and empty arguments), then chunks adding to its arguments.
nlohmann::json tool_call_start_chunk(const ResponseMeta& m, int64_t index, size_t call, const std::string& id,
                                     const std::string& name);
nlohmann::json tool_call_arguments_chunk(const ResponseMeta& m, int64_t index, size_t call, const std::string& arguments);
// The chunk that carries a choice's finish_reason (empty delta / text).
nlohmann::json finish_chunk(const ResponseMeta& m, const std::string& finish_reason, int64_t index = 0);
// The last chunk with stream_options.include_usage: no choices, the usage.
nlohmann::json usage_chunk(const ResponseMeta& m, std::span<const serving::ServeResult> choices);

} // namespace ninfer::tools
