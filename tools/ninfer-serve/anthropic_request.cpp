#include "anthropic_request.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "api_error.hpp"
#include "chat_prompt.hpp"
#include "ninfer/support/error.hpp"
#include "request_json.hpp"
#include "template_json.hpp"

namespace ninfer::tools {
namespace {

using json = RequestJson;

const json* field(const json& o, const char* key) { return request_field(o, key); }

std::string required_string(const json& o, const char* key, const std::string& param) {
  const json* v = field(o, key);
  if (!v || !v->is_string()) throw bad_param(param.empty() ? key : param + "." + key, "required string");
  return v->get<std::string>();
}

std::string block_type(const json& block, const std::string& param) {
  if (!block.is_object()) throw bad_param(param, "expected a content block object");
  return required_string(block, "type", param);
}

// `system`, or a tool_result's `content`: a string, or text blocks.
std::string text_of(const json& v, const std::string& param) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) throw bad_param(param, "expected a string or an array of text blocks");
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = fmt::format("{}[{}]", param, i);
    if (block_type(v[i], p) != "text") throw bad_param(p + ".type", "only text blocks are supported here");
    text += required_string(v[i], "text", p);
  }
  return text;
}

// One Anthropic message as template turns: a user's tool results become tool turns (each in
// place), its text a user turn; an assistant's blocks make one assistant turn.
void add_message(const json& m, size_t index, std::vector<ChatMessage>& out) {
  const std::string p = fmt::format("messages[{}]", index);
  if (!m.is_object()) throw bad_param(p, "expected an object");
  const std::string role = required_string(m, "role", p);
  if (role != "user" && role != "assistant") throw bad_param(p + ".role", fmt::format("'{}': expected user or assistant", role));
  const json* content = field(m, "content");
  if (!content) throw bad_param(p + ".content", "required");
  if (content->is_string()) {
    out.push_back({role, content->get<std::string>(), std::nullopt, {}});
    return;
  }
  if (!content->is_array()) throw bad_param(p + ".content", "expected a string or an array of content blocks");
  if (content->empty()) throw bad_param(p + ".content", "expected at least one content block");
  ChatMessage turn{role, {}, std::nullopt, {}};
  bool has_turn = false; // text (or, for the assistant, anything) waiting to be a turn
  for (size_t i = 0; i < content->size(); ++i) {
    const json& b = (*content)[i];
    const std::string bp = fmt::format("{}.content[{}]", p, i);
    const std::string type = block_type(b, bp);
    if (type == "text") {
      turn.content += required_string(b, "text", bp);
      has_turn = true;
    } else if (type == "tool_use" && role == "assistant") {
      const std::string name = required_string(b, "name", bp);
      const json* input = field(b, "input");
      if (!input || !input->is_object()) throw bad_param(bp + ".input", "required object");
      turn.tool_calls.push_back({name, template_json(*input)});
      has_turn = true;
    } else if ((type == "thinking" || type == "redacted_thinking") && role == "assistant") {
      // Reasoning given back with a tool-use turn, as Anthropic asks clients to do.
      if (type == "thinking") turn.reasoning_content = turn.reasoning_content.value_or("") + required_string(b, "thinking", bp);
    } else if (type == "tool_result" && role == "user") {
      if (has_turn) {
        out.push_back(turn);
        turn = ChatMessage{role, {}, std::nullopt, {}};
        has_turn = false;
      }
      required_string(b, "tool_use_id", bp);
      const json* c = field(b, "content");
      out.push_back({"tool", c ? text_of(*c, bp + ".content") : std::string(), std::nullopt, {}});
    } else {
      throw bad_param(bp + ".type", fmt::format("'{}' blocks are not supported in {} messages", type, role));
    }
  }
  if (has_turn || turn.reasoning_content) out.push_back(std::move(turn));
}

ToolSetup parse_tools(const json& body) {
  ToolSetup s;
  if (const json* tools = field(body, "tools")) {
    if (!tools->is_array()) throw bad_param("tools", "expected an array");
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      const std::string p = fmt::format("tools[{}]", i);
      if (!t.is_object()) throw bad_param(p, "expected an object");
      if (const json* type = field(t, "type"); type && (!type->is_string() || type->get<std::string>() != "custom"))
        throw bad_param(p + ".type", "only client tools (no type, or \"custom\") are supported");
      std::string name = required_string(t, "name", p);
      if (std::string e = check_function_name(name); !e.empty()) throw bad_param(p + ".name", e);
      if (std::find(s.names.begin(), s.names.end(), name) != s.names.end())
        throw bad_param(p + ".name", fmt::format("'{}' is declared twice", name));
      const json* schema = field(t, "input_schema");
      if (!schema || !schema->is_object()) throw bad_param(p + ".input_schema", "required JSON schema object");
      // The shape the Qwen template was trained with (OpenAI's function entry).
      json function = json::object();
      function["name"] = name;
      if (const json* d = field(t, "description")) {
        if (!d->is_string()) throw bad_param(p + ".description", "expected a string");
        function["description"] = *d;
      }
      function["parameters"] = *schema;
      json entry = json::object();
      entry["type"] = "function";
      entry["function"] = std::move(function);
      s.rendered.push_back(template_json(entry));
      s.names.push_back(std::move(name));
    }
  }
  const json* choice = field(body, "tool_choice");
  if (!choice) return s;
  if (!choice->is_object()) throw bad_param("tool_choice", "expected an object");
  const std::string type = required_string(*choice, "type", "tool_choice");
  if (type == "auto") s.choice = ToolChoice::Auto;
  else if (type == "any") s.choice = ToolChoice::Required;
  else if (type == "none") s.choice = ToolChoice::None;
  else if (type == "tool") s.choice = ToolChoice::Named;
  else throw bad_param("tool_choice.type", fmt::format("'{}': expected auto, any, tool or none", type));
  if (s.choice == ToolChoice::Named) {
    s.named = required_string(*choice, "name", "tool_choice");
    if (std::find(s.names.begin(), s.names.end(), s.named) == s.names.end())
      throw bad_param("tool_choice.name", fmt::format("'{}' is not one of the request's tools", s.named));
  }
  if (s.choice == ToolChoice::Required && s.names.empty()) throw bad_param("tool_choice", "\"any\" needs tools");
  if (const json* d = field(*choice, "disable_parallel_tool_use")) {
    if (!d->is_boolean()) throw bad_param("tool_choice.disable_parallel_tool_use", "expected true or false");
    s.parallel = !d->get<bool>();
  }
  return s;
}

// Anthropic's thinking switch: off unless {"type": "enabled", "budget_tokens": N}; its budget
// (tokens of reasoning before </think> is forced), nullopt when off.
std::optional<int64_t> thinking_budget(const json& body) {
  const json* t = field(body, "thinking");
  if (!t) return std::nullopt;
  if (!t->is_object()) throw bad_param("thinking", "expected an object");
  const std::string type = required_string(*t, "type", "thinking");
  if (type == "disabled") return std::nullopt;
  if (type != "enabled") throw bad_param("thinking.type", fmt::format("'{}': expected enabled or disabled", type));
  const json* budget = field(*t, "budget_tokens");
  if (!budget || !budget->is_number_integer() || budget->get<int64_t>() < 1)
    throw bad_param("thinking.budget_tokens", "required positive integer");
  return budget->get<int64_t>();
}

MessagesRequest parse_fields(const json& body, const LoadedModel& model, bool count_only) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) throw bad_param("model", "expected a string");
    if (m->get<std::string>() != model.name)
      throw ApiError(404, fmt::format("model: '{}' does not exist: this server serves '{}'", m->get<std::string>(), model.name),
                     "not_found_error", "model");
  }
  MessagesRequest out;
  ParsedRequest& p = out.request;
  GenerationRequest& r = p.generation;
  r.sampling = model.manifest.sampling;
  for (int64_t id : model.lm->config().eos_token_ids) r.stop.token_ids.insert(static_cast<int32_t>(id));

  std::vector<ChatMessage> messages;
  if (const json* system = field(body, "system")) messages.push_back({"system", text_of(*system, "system"), std::nullopt, {}});
  const json* msgs = field(body, "messages");
  if (!msgs) throw bad_param("messages", "required");
  if (!msgs->is_array() || msgs->empty()) throw bad_param("messages", "expected a non-empty array");
  for (size_t i = 0; i < msgs->size(); ++i) add_message((*msgs)[i], i, messages);
  // A last assistant message asks Anthropic's models to continue it; the template can only
  // close that turn and open a new one, which would answer something else.
  if ((*msgs).back().is_object() && (*msgs).back().value("role", json()) == "assistant")
    throw bad_param(fmt::format("messages[{}]", msgs->size() - 1),
                    "a final assistant message (prefill) is not supported: end with a user message");
  p.tools = parse_tools(body);
  p.options.reasoning.reset();
  const std::optional<int64_t> budget = thinking_budget(body);
  make_chat_prompt(messages, budget.has_value(), budget, p.tools, model, r, p.options);
  if (count_only) return out;

  const json* max_tokens = field(body, "max_tokens");
  if (!max_tokens) throw bad_param("max_tokens", "required");
  if (!max_tokens->is_number_integer() || max_tokens->get<int64_t>() < 1)
    throw bad_param("max_tokens", "expected a positive integer");
  r.max_new_tokens = max_tokens->get<int64_t>();
  p.max_tokens_field = "max_tokens";
  if (auto v = request_number(body, "temperature", 0, 1)) r.sampling.temperature = *v;
  if (auto v = request_number(body, "top_p")) r.sampling.top_p = *v;
  if (const json* k = field(body, "top_k")) {
    if (!k->is_number_integer() || k->get<int64_t>() < 0) throw bad_param("top_k", "expected a non-negative integer");
    r.sampling.top_k = std::min<int64_t>(k->get<int64_t>(), INT32_MAX);
  }
  validate_sampling(r.sampling);
  if (const json* s = field(body, "stop_sequences")) {
    if (!s->is_array()) throw bad_param("stop_sequences", "expected an array of strings");
    for (const json& x : *s) {
      if (!x.is_string() || x.get<std::string>().empty()) throw bad_param("stop_sequences", "expected non-empty strings");
      out.stop_sequences.push_back(x.get<std::string>());
    }
  }
  r.stop.strings = out.stop_sequences;
  for (std::string& s : p.tools.stop_strings()) r.stop.strings.push_back(std::move(s));
  if (const json* st = field(body, "stream")) {
    if (!st->is_boolean()) throw bad_param("stream", "expected true or false");
    p.stream = st->get<bool>();
  }
  if (const json* meta = field(body, "metadata"); meta && meta->is_object())
    if (const json* u = field(*meta, "user_id"); u && u->is_string()) p.options.user = u->get<std::string>();
  return out;
}

} // namespace

MessagesRequest parse_messages_request(const std::string& text, const LoadedModel& model, bool count_only) {
  const json body = parse_request_body(text);
  try {
    return parse_fields(body, model, count_only);
  } catch (const json::exception& e) {
    throw ApiError(400, fmt::format("the request body has a field of an unexpected type: {}", e.what()));
  }
}

} // namespace ninfer::tools
