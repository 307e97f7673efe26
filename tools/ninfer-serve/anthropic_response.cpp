#include "anthropic_response.hpp"

#include <random>

namespace ninfer::tools {

using nlohmann::json;

MessageBlocks::MessageBlocks(std::optional<ToolCallOptions> tools) {
  if (tools) parser_.emplace(std::move(*tools));
}

void MessageBlocks::open(const std::string& type, std::vector<json>& out) {
  if (open_ == type) return;
  close(out);
  json block = type == "thinking" ? json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                                  : json{{"type", "text"}, {"text", ""}};
  out.push_back(json{{"type", "content_block_start"}, {"index", content_.size()}, {"content_block", block}});
  content_.push_back(block);
  open_ = type;
}

void MessageBlocks::close(std::vector<json>& out) {
  if (open_.empty()) return;
  out.push_back(json{{"type", "content_block_stop"}, {"index", content_.size() - 1}});
  open_.clear();
}

void MessageBlocks::text(const std::string& type, const std::string& piece, std::vector<json>& out) {
  if (piece.empty()) return;
  open(type, out);
  content_.back()[type] = content_.back()[type].get<std::string>() + piece;
  const json delta = type == "thinking" ? json{{"type", "thinking_delta"}, {"thinking", piece}}
                                        : json{{"type", "text_delta"}, {"text", piece}};
  out.push_back(json{{"type", "content_block_delta"}, {"index", content_.size() - 1}, {"delta", delta}});
}

void MessageBlocks::call_end(const std::string& raw, std::vector<json>& out) {
  json input;
  try {
    input = json::parse(call_arguments_);
  } catch (const json::exception&) {
  }
  if (!input.is_object()) {
    // Not a call Anthropic's clients can take (`input` must be an object): the model's text.
    text("text", raw, out);
    return;
  }
  close(out);
  const std::string id = new_tool_use_id();
  const size_t index = content_.size();
  out.push_back(json{{"type", "content_block_start"},
                     {"index", index},
                     {"content_block", {{"type", "tool_use"}, {"id", id}, {"name", call_name_}, {"input", json::object()}}}});
  out.push_back(json{{"type", "content_block_delta"},
                     {"index", index},
                     {"delta", {{"type", "input_json_delta"}, {"partial_json", call_arguments_}}}});
  out.push_back(json{{"type", "content_block_stop"}, {"index", index}});
  content_.push_back(json{{"type", "tool_use"}, {"id", id}, {"name", call_name_}, {"input", input}});
  ++tool_uses_;
}

void MessageBlocks::handle(const std::vector<ToolCallEvent>& events, std::vector<json>& out) {
  for (const ToolCallEvent& e : events) {
    switch (e.kind) {
      case ToolCallEvent::Kind::Content: text("text", e.text, out); break;
      case ToolCallEvent::Kind::CallStart:
        call_name_ = e.text;
        call_arguments_.clear();
        break;
      case ToolCallEvent::Kind::Arguments: call_arguments_ += e.text; break;
      case ToolCallEvent::Kind::CallEnd: call_end(e.text, out); break;
    }
  }
}

std::vector<json> MessageBlocks::push(const std::string& piece, bool reasoning) {
  std::vector<json> out;
  if (reasoning || !parser_) text(reasoning ? "thinking" : "text", piece, out);
  else handle(parser_->push(piece), out);
  return out;
}

std::vector<json> MessageBlocks::finish() {
  std::vector<json> out;
  if (parser_) handle(parser_->finish(), out);
  close(out);
  return out;
}

std::string new_tool_use_id() {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
  std::string id = "toolu_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(rng)];
  return id;
}

StopReason stop_reason(const serving::ServeResult& r, size_t tool_uses, const std::vector<std::string>& stop_sequences,
                       const Tokenizer* tokenizer) {
  if (r.finish_reason == "length") return {"max_tokens", std::nullopt};
  if (tool_uses > 0) return {"tool_use", std::nullopt};
  if (!stop_sequences.empty() && tokenizer) {
    const std::string text = tokenizer->decode(r.generated_ids, {.skip_special_tokens = true, .skip_unknown_ids = true});
    std::optional<std::string> first;
    size_t first_end = std::string::npos;
    for (const std::string& s : stop_sequences) {
      const size_t at = text.find(s);
      if (at != std::string::npos && at + s.size() < first_end) {
        first_end = at + s.size();
        first = s;
      }
    }
    if (first) return {"stop_sequence", first};
  }
  return {"end_turn", std::nullopt};
}

json usage_json(const MessageUsage& u) {
  return json{{"input_tokens", u.prompt - u.cached},
              {"cache_creation_input_tokens", 0},
              {"cache_read_input_tokens", u.cached},
              {"output_tokens", u.output}};
}

json message_json(const std::string& id, const std::string& model, const json& content, const StopReason& stop,
                  const MessageUsage& usage) {
  return json{{"id", id},
              {"type", "message"},
              {"role", "assistant"},
              {"model", model},
              {"content", content},
              {"stop_reason", stop.reason},
              {"stop_sequence", stop.sequence ? json(*stop.sequence) : json(nullptr)},
              {"usage", usage_json(usage)}};
}

json message_start_event(const std::string& id, const std::string& model, int64_t input_tokens) {
  return json{{"type", "message_start"},
              {"message",
               {{"id", id},
                {"type", "message"},
                {"role", "assistant"},
                {"model", model},
                {"content", json::array()},
                {"stop_reason", nullptr},
                {"stop_sequence", nullptr},
                {"usage", usage_json({input_tokens, 0, 0})}}}};
}

json message_delta_event(const StopReason& stop, const MessageUsage& usage) {
  return json{{"type", "message_delta"},
              {"delta", {{"stop_reason", stop.reason}, {"stop_sequence", stop.sequence ? json(*stop.sequence) : json(nullptr)}}},
              {"usage", usage_json(usage)}};
}

json message_stop_event() { return json{{"type", "message_stop"}}; }

AnthropicError anthropic_error(const ApiError& e) {
  int status = e.status;
  if (status == 413 && e.code == "context_length_exceeded") status = 400;
  if (status == 503) status = 529;
  const char* type = "api_error";
  switch (status) {
    case 400: type = "invalid_request_error"; break;
    case 401: type = "authentication_error"; break;
    case 403: type = "permission_error"; break;
    case 404: type = "not_found_error"; break;
    case 408: type = "timeout_error"; break;
    case 413: type = "request_too_large"; break;
    case 429: type = "rate_limit_error"; break;
    case 529: type = "overloaded_error"; break;
    default: type = status >= 500 ? "api_error" : "invalid_request_error";
  }
  return {status, json{{"type", "error"}, {"error", {{"type", type}, {"message", e.what()}}}}};
}

} // namespace ninfer::tools
