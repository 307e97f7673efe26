#include "openai_response.hpp"

#include <atomic>
#include <chrono>

namespace ninfer::tools {

using nlohmann::json;

namespace {

const char* object_name(Endpoint e, bool chunk) {
  if (e == Endpoint::Chat) return chunk ? "chat.completion.chunk" : "chat.completion";
  return "text_completion";
}

json chunk_base(const ResponseMeta& m) {
  return json{{"id", m.id}, {"object", object_name(m.endpoint, true)}, {"created", m.created}, {"model", m.model}};
}

} // namespace

ResponseMeta new_response_meta(Endpoint endpoint, const std::string& model) {
  static std::atomic<uint64_t> counter{0};
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const int64_t created = std::chrono::duration_cast<std::chrono::seconds>(now).count();
  const std::string prefix = endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-";
  return {endpoint, prefix + std::to_string(created) + "-" + std::to_string(counter++), model, created};
}

json usage_json(const serving::ServeResult& r) {
  const int64_t completion = static_cast<int64_t>(r.generated_ids.size());
  return json{{"prompt_tokens", r.prompt_tokens},
              {"completion_tokens", completion},
              {"total_tokens", r.prompt_tokens + completion}};
}

json completion_json(const ResponseMeta& m, const serving::ServeResult& r, bool token_ids) {
  json choice{{"index", 0}, {"finish_reason", r.finish_reason}, {"logprobs", nullptr}};
  if (m.endpoint == Endpoint::Chat)
    choice["message"] = json{{"role", "assistant"}, {"content", r.text}};
  else
    choice["text"] = r.text;
  if (token_ids) choice["token_ids"] = r.generated_ids;
  return json{{"id", m.id},       {"object", object_name(m.endpoint, false)},
              {"created", m.created}, {"model", m.model},
              {"choices", json::array({choice})}, {"usage", usage_json(r)}};
}

json text_chunk(const ResponseMeta& m, const std::string& text, bool first) {
  json choice{{"index", 0}, {"finish_reason", nullptr}, {"logprobs", nullptr}};
  if (m.endpoint == Endpoint::Chat) {
    json delta{{"content", text}};
    if (first) delta["role"] = "assistant";
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  json c = chunk_base(m);
  c["choices"] = json::array({choice});
  return c;
}

json finish_chunk(const ResponseMeta& m, const std::string& finish_reason) {
  json choice{{"index", 0}, {"finish_reason", finish_reason}, {"logprobs", nullptr}};
  if (m.endpoint == Endpoint::Chat) choice["delta"] = json::object();
  else choice["text"] = "";
  json c = chunk_base(m);
  c["choices"] = json::array({choice});
  return c;
}

json usage_chunk(const ResponseMeta& m, const serving::ServeResult& r) {
  json c = chunk_base(m);
  c["choices"] = json::array();
  c["usage"] = usage_json(r);
  return c;
}

} // namespace ninfer::tools
