#include "openai_request.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "api_error.hpp"
#include "chat_prompt.hpp"
#include "openai_tools.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/tokenizer/chat_format.hpp"

namespace ninfer::tools {
namespace {

using json = RequestJson;

const json* field(const json& body, const char* key) { return request_field(body, key); }

std::optional<int64_t> integer(const json& body, const char* key, int64_t lo, int64_t hi) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) throw bad_param(key, "expected an integer");
  // Past INT64_MAX is out of every range here (a seed too, as vLLM bounds it): never clamped,
  // which would give 2^63 and 2^64 - 1 the same seed.
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX))
    throw bad_param(key, fmt::format("{} is outside [{}, {}]", v->get<uint64_t>(), lo, hi));
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) throw bad_param(key, fmt::format("{} is outside [{}, {}]", x, lo, hi));
  return x;
}

// `param`: the field's path where it is not at the top level ("stream_options.include_usage").
bool boolean(const json& body, const char* key, const char* param = nullptr) {
  const json* v = field(body, key);
  if (!v) return false;
  if (!v->is_boolean()) throw bad_param(param ? param : key, "expected true or false");
  return v->get<bool>();
}

// Text of a message's content: a string, or an array of {"type": "text", "text": ...} parts.
std::string content_text(const json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_null()) return {};
  if (!content.is_array()) throw bad_param(param, "expected a string or an array of text parts");
  if (content.empty()) throw bad_param(param, "expected at least one text part");
  std::string text;
  for (const json& part : content) {
    const json* type = part.is_object() ? field(part, "type") : nullptr;
    const json* t = part.is_object() ? field(part, "text") : nullptr;
    if (!type || !type->is_string() || type->get<std::string>() != "text" || !t || !t->is_string())
      throw bad_param(param, "only {\"type\": \"text\", \"text\": ...} parts are supported");
    text += part["text"].get<std::string>();
  }
  return text;
}

std::vector<int32_t> chat_prompt(const json& body, const LoadedModel& model, GenerationRequest& r,
                                 serving::RequestOptions& options, const ToolSetup& tools) {
  if (!model.tokenizer) throw ApiError(400, "this model has no tokenizer: use /v1/completions with token-id prompts");
  if (model.manifest.chat_template == ChatTemplate::None)
    throw ApiError(400, "this model's manifest sets chat_template: none: use /v1/completions");
  const json* msgs = field(body, "messages");
  if (!msgs) throw bad_param("messages", "required");
  if (!msgs->is_array() || msgs->empty()) throw bad_param("messages", "expected a non-empty array");
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string p = fmt::format("messages[{}]", i);
    if (!m.is_object()) throw bad_param(p, "expected an object");
    const json* role = field(m, "role");
    if (!role || !role->is_string()) throw bad_param(p + ".role", "required string");
    const std::string rs = role->get<std::string>();
    if (rs != "system" && rs != "developer" && rs != "user" && rs != "assistant" && rs != "tool")
      throw bad_param(p + ".role", fmt::format("'{}': expected system, developer, user, assistant or tool", rs));
    // Only an assistant turn (one that calls tools) may leave its content out, as in OpenAI's API.
    if (rs != "assistant" && !field(m, "content")) throw bad_param(p + ".content", "required");
    if (rs == "developer") {
      messages.push_back({"system", content_text(m.at("content"), p + ".content"), std::nullopt, {}});
      continue;
    }
    if (rs == "tool") {
      const json* id = field(m, "tool_call_id");
      if (!id || !id->is_string()) throw bad_param(p + ".tool_call_id", "required string (the id of the call answered)");
    }
    ChatMessage cm{rs, content_text(m.value("content", json()), p + ".content"), std::nullopt, {}};
    if (const json* rc = field(m, "reasoning_content"); rc && rc->is_string()) cm.reasoning_content = rc->get<std::string>();
    if (const json* calls = field(m, "tool_calls"); calls && rs == "assistant")
      cm.tool_calls = parse_openai_tool_calls(*calls, p + ".tool_calls");
    messages.push_back(std::move(cm));
  }
  // Qwen's thinking switch, as vLLM takes it: chat_template_kwargs.enable_thinking.
  bool thinking = true;
  if (const json* kw = field(body, "chat_template_kwargs")) {
    if (!kw->is_object()) throw bad_param("chat_template_kwargs", "expected an object");
    if (const json* e = field(*kw, "enable_thinking")) {
      if (!e->is_boolean()) throw bad_param("chat_template_kwargs.enable_thinking", "expected true or false");
      thinking = e->get<bool>();
    }
  }
  // vLLM's name for the cap on reasoning tokens.
  std::optional<int64_t> budget;
  if (const json* b = field(body, "thinking_token_budget")) {
    if (!b->is_number_integer() || b->get<int64_t>() < 1) throw bad_param("thinking_token_budget", "expected an integer >= 1");
    budget = b->get<int64_t>();
  }
  make_chat_prompt(messages, thinking, budget, tools, model, r, options);
  return r.prompt_ids;
}

std::vector<int32_t> token_ids(const json& ids, int64_t vocab) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!ids[i].is_number_integer()) throw bad_param("prompt", "a token-id prompt must hold integers only");
    const int64_t id = ids[i].get<int64_t>();
    if (id < 0 || id >= vocab) throw bad_param("prompt", fmt::format("token id {} is outside the vocabulary (0..{})", id, vocab - 1));
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

// OpenAI's prompt: a string, an array of token ids, or a one-element array of either (n=1).
std::vector<int32_t> completion_prompt(const json& body, const LoadedModel& model) {
  const json* p = field(body, "prompt");
  if (!p) throw bad_param("prompt", "required");
  const json* prompt = p;
  if (p->is_array() && !p->empty() && (p->front().is_string() || p->front().is_array())) {
    if (p->size() != 1) throw bad_param("prompt", "only one prompt per request is supported");
    prompt = &p->front();
  }
  if (prompt->is_array()) return token_ids(*prompt, model.lm->vocab_size());
  if (!prompt->is_string()) throw bad_param("prompt", "expected a string or an array of token ids");
  if (!model.tokenizer) throw bad_param("prompt", "this model has no tokenizer: give the prompt as token ids");
  return model.tokenizer->encode(prompt->get<std::string>());
}

std::vector<std::string> stop_strings(const json& body) {
  const json* s = field(body, "stop");
  if (!s) return {};
  if (s->is_string()) return {s->get<std::string>()};
  if (!s->is_array()) throw bad_param("stop", "expected a string or an array of strings");
  std::vector<std::string> out;
  for (const json& x : *s) {
    if (!x.is_string()) throw bad_param("stop", "expected a string or an array of strings");
    out.push_back(x.get<std::string>());
  }
  return out;
}

// OpenAI's logit_bias: {"TOKEN_ID": BIAS, ...}, ids as decimal strings in the vocabulary,
// biases in [-100, 100] (SamplingParams::validate checks the range and names the field).
std::vector<std::pair<TokenId, double>> logit_bias(const json& body, int64_t vocab) {
  const json* f = field(body, "logit_bias");
  if (!f) return {};
  if (!f->is_object()) throw bad_param("logit_bias", "expected an object mapping token ids to biases");
  std::vector<std::pair<TokenId, double>> out;
  for (const auto& [key, value] : f->items()) {
    const bool digits = !key.empty() && key.size() <= 10 &&
                        std::all_of(key.begin(), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    const int64_t id = digits ? std::stoll(key) : -1;
    if (id < 0 || id >= vocab)
      throw bad_param("logit_bias", fmt::format("key \"{}\" is not a token id of this model (0..{})", key, vocab - 1));
    if (!value.is_number()) throw bad_param("logit_bias", fmt::format("token {}: expected a number", key));
    out.emplace_back(static_cast<TokenId>(id), value.get<double>());
  }
  return out;
}

void check_model(const json& body, const LoadedModel& model) {
  const json* m = field(body, "model");
  if (!m) return; // the one model served
  if (!m->is_string()) throw bad_param("model", "expected a string");
  if (m->get<std::string>() != model.name)
    throw ApiError(404, fmt::format("The model '{}' does not exist: this server serves '{}'", m->get<std::string>(), model.name),
                   "invalid_request_error", "model", "model_not_found");
}

ParsedRequest parse_fields(Endpoint endpoint, const json& body, const LoadedModel& model);

// Fields of the OpenAI API that would change what comes back and that ninfer does not do: a
// request that sets one is refused by name (400) rather than answered as if it had not.
void refuse_unsupported(Endpoint endpoint, const json& body) {
  if (const json* f = field(body, "response_format")) {
    const json* type = f->is_object() ? field(*f, "type") : nullptr;
    if (!type || !type->is_string()) throw bad_param("response_format", "expected an object with a string \"type\"");
    if (type->get<std::string>() != "text")
      throw bad_param("response_format", fmt::format("type \"{}\" is not supported (ninfer has no constrained decoding); "
                                                     "leave it out or send {{\"type\": \"text\"}}",
                                                     type->get<std::string>()));
  }
  if (endpoint == Endpoint::Chat) {
    for (const char* legacy : {"functions", "function_call"})
      if (field(body, legacy)) throw bad_param(legacy, "is not supported: use \"tools\" and \"tool_choice\"");
    return;
  }
  if (const json* f = field(body, "suffix"); f && !(f->is_string() && f->get<std::string>().empty()))
    throw bad_param("suffix", "is not supported");
  if (const json* f = field(body, "best_of"); f && !(f->is_number_integer() && f->get<int64_t>() == 1))
    throw bad_param("best_of", "is not supported beyond 1: ask for \"n\" choices instead");
}

} // namespace

ParsedRequest parse_request(Endpoint endpoint, const std::string& text, const LoadedModel& model) {
  const json body = parse_request_body(text);
  try {
    return parse_fields(endpoint, body, model);
  } catch (const json::exception& e) {
    // A field of an unexpected type that a check above missed: still the client's mistake.
    throw ApiError(400, fmt::format("the request body has a field of an unexpected type: {}", e.what()));
  }
}

namespace {

ParsedRequest parse_fields(Endpoint endpoint, const json& body, const LoadedModel& model) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  check_model(body, model);
  refuse_unsupported(endpoint, body);
  ParsedRequest out;
  GenerationRequest& r = out.generation;
  r.sampling = model.manifest.sampling;
  for (int64_t id : model.lm->config().eos_token_ids) r.stop.token_ids.insert(static_cast<int32_t>(id));
  if (endpoint == Endpoint::Chat) out.tools = parse_openai_tools(body);
  r.prompt_ids = endpoint == Endpoint::Chat ? chat_prompt(body, model, r, out.options, out.tools) : completion_prompt(body, model);

  out.n = integer(body, "n", 1, kMaxChoices).value_or(1);
  if (const json* u = field(body, "user")) {
    if (!u->is_string()) throw bad_param("user", "expected a string");
    out.options.user = u->get<std::string>();
  }
  if (endpoint == Endpoint::Chat) {
    // Chat: `logprobs: true`, and `top_logprobs: K` alternatives per token (needs logprobs).
    out.logprobs = boolean(body, "logprobs");
    const auto top = integer(body, "top_logprobs", 0, kMaxTopLogprobs);
    if (top && *top > 0 && !out.logprobs) throw bad_param("top_logprobs", "needs \"logprobs\": true");
    r.sampling.top_logprobs = top.value_or(0);
  } else if (const json* lp = field(body, "logprobs")) {
    // Legacy completions: `logprobs: K` (0..20) alternatives per token; the chosen one's always.
    if (lp->is_boolean()) throw bad_param("logprobs", "expected an integer (0..20) on /v1/completions");
    out.logprobs = true;
    r.sampling.top_logprobs = *integer(body, "logprobs", 0, kMaxTopLogprobs);
  }
  if (auto v = request_number(body, "temperature", 0, 2)) r.sampling.temperature = *v;
  if (auto v = request_number(body, "top_p")) r.sampling.top_p = *v;
  if (auto v = integer(body, "top_k", -1, INT32_MAX)) r.sampling.top_k = *v < 0 ? 0 : *v;
  if (auto v = request_number(body, "min_p", 0, 1)) r.sampling.min_p = *v;
  if (auto v = request_number(body, "presence_penalty", -2, 2)) r.sampling.presence_penalty = *v;
  if (auto v = request_number(body, "frequency_penalty", -2, 2)) r.sampling.frequency_penalty = *v;
  if (auto v = request_number(body, "repetition_penalty", kMinRepetitionPenalty, kMaxRepetitionPenalty))
    r.sampling.repetition_penalty = *v;
  if (auto v = integer(body, "seed", INT64_MIN, INT64_MAX)) r.sampling.seed = static_cast<uint64_t>(*v);
  r.sampling.logit_bias = logit_bias(body, model.lm->vocab_size());
  validate_sampling(r.sampling);
  // max_completion_tokens is OpenAI's newer name for max_tokens: either may be given, or both
  // when they agree (a client that sets both for old and new servers).
  // Completions may echo the prompt; with max_tokens 0 that is all they do (scoring a text).
  if (endpoint == Endpoint::Completions) out.echo = boolean(body, "echo");
  const int64_t least_tokens = out.echo ? 0 : 1;
  auto max_tokens = integer(body, "max_completion_tokens", least_tokens, INT64_MAX);
  const auto legacy_max = integer(body, "max_tokens", least_tokens, INT64_MAX);
  if (max_tokens && legacy_max && *max_tokens != *legacy_max)
    throw bad_param("max_completion_tokens", fmt::format("{} differs from max_tokens ({}): give one, or the same value",
                                                         *max_tokens, *legacy_max));
  if (max_tokens) out.max_tokens_field = "max_completion_tokens";
  if (!max_tokens && legacy_max) {
    max_tokens = legacy_max;
    out.max_tokens_field = "max_tokens";
  }
  r.max_new_tokens = max_tokens.value_or(model.manifest.max_new_tokens);
  r.stop.strings = stop_strings(body);
  for (std::string& s : out.tools.stop_strings()) r.stop.strings.push_back(std::move(s));
  if (!r.stop.strings.empty() && !model.tokenizer) throw bad_param("stop", "stop strings need a tokenizer and this model has none");
  if (boolean(body, "ignore_eos")) r.stop.token_ids.clear();

  out.stream = boolean(body, "stream");
  // The prompt's own logprobs and top alternatives (at least one: the switch that scores it).
  if (out.echo && out.logprobs) r.prompt_logprobs = std::max<int64_t>(r.sampling.top_logprobs, 1);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) throw bad_param("stream_options", "expected an object");
    out.include_usage = boolean(*so, "include_usage", "stream_options.include_usage");
  }
  out.return_token_ids = boolean(body, "return_token_ids");
  return out;
}

} // namespace

} // namespace ninfer::tools
