// Response bodies in OpenAI's shapes: whole completions and streamed chunks, for both the
// chat and the legacy completions endpoint.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "ninfer/serving/request_handle.hpp"
#include "openai_request.hpp"

namespace ninfer::tools {

struct ResponseMeta {
  Endpoint endpoint;
  std::string id;    // "chatcmpl-..." / "cmpl-..."
  std::string model;
  int64_t created;   // unix seconds
};

ResponseMeta new_response_meta(Endpoint endpoint, const std::string& model);

nlohmann::json usage_json(const serving::ServeResult& r);
nlohmann::json completion_json(const ResponseMeta& m, const serving::ServeResult& r, bool token_ids);

// One streamed chunk carrying `text`; the first chat chunk also says the role.
nlohmann::json text_chunk(const ResponseMeta& m, const std::string& text, bool first);
// The chunk that carries finish_reason (empty delta / text).
nlohmann::json finish_chunk(const ResponseMeta& m, const std::string& finish_reason);
// The last chunk with stream_options.include_usage: no choices, the usage.
nlohmann::json usage_chunk(const ResponseMeta& m, const serving::ServeResult& r);

} // namespace ninfer::tools
