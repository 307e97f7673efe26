// Parsing of /v1/chat/completions and /v1/completions bodies into a GenerationRequest.
// Every problem is an ApiError (400) naming the field.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "loaded_model.hpp"
#include "ninfer/generation/generate.hpp"
#include "ninfer/serving/engine.hpp"
#include "tool_choice.hpp"

namespace ninfer::tools {

enum class Endpoint { Chat, Completions };

// The most alternatives `top_logprobs` (chat) or `logprobs` (completions) may ask for per token.
inline constexpr int64_t kMaxTopLogprobs = 20;

// The most choices `n` may ask for in one request (each takes a slot or a queue place).
inline constexpr int64_t kMaxChoices = 16;

struct ParsedRequest {
  GenerationRequest generation; // generation.sampling.top_logprobs: alternatives per token
  serving::RequestOptions options; // reasoning split: chat with thinking on; `user`
  int64_t n = 1;                  // choices: each is generated as a request of its own
  bool logprobs = false;          // chat `logprobs: true`, or completions `logprobs: K`
  bool stream = false;
  bool include_usage = false;   // stream_options.include_usage
  bool return_token_ids = false; // extension: choices[].token_ids (streamed: one chunk per token)
  // Completions `echo`: the reply's text (and logprobs) begin with the prompt's; with logprobs
  // the prompt's tokens are scored (generation.prompt_logprobs), and max_tokens may be 0.
  bool echo = false;
  // "max_tokens" or "max_completion_tokens" when the request set the limit (then prompt plus
  // limit must fit the context); empty when the manifest's default applies (generation then
  // stops where the context is full).
  std::string max_tokens_field;
  ToolSetup tools; // chat: `tools`, `tool_choice`, `parallel_tool_calls`
};

// `body` is the raw request text (malformed JSON is a 400 too).
ParsedRequest parse_request(Endpoint endpoint, const std::string& body, const LoadedModel& model);

} // namespace ninfer::tools
