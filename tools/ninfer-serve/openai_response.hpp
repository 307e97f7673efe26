// Response bodies in OpenAI's shapes: whole completions and streamed chunks, for both the
// chat and the legacy completions endpoint.
#pragma once

#include <nlohmann/json.hpp>

#include <span>
#include <string>
#include <vector>

#include "ninfer/serving/request_handle.hpp"
#include "ninfer/tokenizer/tokenizer.hpp"
#include "openai_request.hpp"

namespace ninfer::tools {

struct ResponseMeta {
  Endpoint endpoint;
  std::string id;    // "chatcmpl-..." / "cmpl-..."
  std::string model;
  int64_t created;   // unix seconds
  bool logprobs = false;  // the request asked for logprobs
  bool reasoning = false; // chat with thinking: the message has reasoning_content
  const Tokenizer* tokenizer = nullptr; // token text in logprobs (null: "token_id:N")
};

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
// The chunk that carries a choice's finish_reason (empty delta / text).
nlohmann::json finish_chunk(const ResponseMeta& m, const std::string& finish_reason, int64_t index = 0);
// The last chunk with stream_options.include_usage: no choices, the usage.
nlohmann::json usage_chunk(const ResponseMeta& m, std::span<const serving::ServeResult> choices);

} // namespace ninfer::tools
