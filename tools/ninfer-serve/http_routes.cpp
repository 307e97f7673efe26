#include "http_routes.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <mutex>

#include "api_error.hpp"
#include "generation_submit.hpp"
#include "openai_request.hpp"
#include "openai_response.hpp"

namespace ninfer::tools {
namespace {

using nlohmann::json;

void send_error(Exchange& ex, const ApiError& e) {
  ex.reply(e.status, "application/json", dump(e.body()), retry_after_header(e.status));
}

std::string event(const std::string& data) { return sse_event(data); }

// One generation request (its `n` choices) between submission and reply. pump() runs on a
// worker after each notification from the engine; the mutex keeps pumps of one request in order.
struct Reply {
  std::vector<std::shared_ptr<serving::RequestHandle>> handles; // one per choice
  std::shared_ptr<Exchange> ex;
  ResponseMeta meta;
  bool stream = false;
  bool include_usage = false;
  bool token_ids = false; // return_token_ids: a chunk per token, with its id
  std::mutex mutex;
  bool ended = false;
  std::vector<std::optional<serving::ServeResult>> results; // per choice, once finished
  std::vector<int64_t> text_offsets; // completions logprobs: where each choice's next token's text starts

  bool all_finished() {
    for (auto& h : handles)
      if (!h->finished()) return false;
    return true;
  }

  std::vector<serving::ServeResult> finished_results() const {
    std::vector<serving::ServeResult> out;
    for (const auto& r : results) out.push_back(*r);
    return out;
  }

  void cancel_all() {
    for (auto& h : handles) h->cancel();
  }

  // Streamed chat with tools: each choice's answer goes through its own call parser.
  std::vector<std::unique_ptr<ToolCallParser>> parsers;

  json call_chunk(size_t i, const ToolCallEvent& e) {
    const auto index = static_cast<int64_t>(i);
    switch (e.kind) {
      case ToolCallEvent::Kind::CallStart: return tool_call_start_chunk(meta, index, e.call, new_tool_call_id(), e.text);
      case ToolCallEvent::Kind::Arguments: return tool_call_arguments_chunk(meta, index, e.call, e.text);
      default: return text_chunk(meta, e.text, false, false, index);
    }
  }

  // The chunks a piece of choice i's text makes: reasoning and plain answers as they are, an
  // answer with tools as content and call chunks.
  std::vector<json> answer_chunks(size_t i, const std::string& text, bool reasoning) {
    std::vector<json> chunks;
    if (parsers.empty() || reasoning) {
      if (!text.empty()) chunks.push_back(text_chunk(meta, text, false, reasoning, static_cast<int64_t>(i)));
      return chunks;
    }
    for (const ToolCallEvent& e : parsers[i]->push(text))
      if (e.kind != ToolCallEvent::Kind::CallEnd) chunks.push_back(call_chunk(i, e));
    return chunks;
  }

  void pump() {
    std::lock_guard lock(mutex);
    if (ended) return;
    results.resize(handles.size());
    text_offsets.resize(handles.size(), 0);
    if (stream && meta.tools && parsers.empty())
      for (size_t i = 0; i < handles.size(); ++i) parsers.push_back(std::make_unique<ToolCallParser>(*meta.tools));
    if (!stream) {
      for (size_t i = 0; i < handles.size(); ++i) {
        if (!results[i]) results[i] = handles[i]->wait_for(std::chrono::milliseconds(0));
        if (!results[i]) return;
      }
      ended = true;
      for (const auto& r : results)
        if (auto err = failure(*r)) return send_error(*ex, *err);
      ex->reply(200, "application/json", dump(completion_json(meta, finished_results(), token_ids)));
      return;
    }
    // Server-sent events: one `data: {chunk}` per text piece, each choice's finish chunk, the
    // usage chunk if asked for, then `data: [DONE]`.
    std::string out;
    std::optional<ApiError> error;
    size_t done = 0;
    for (size_t i = 0; i < handles.size(); ++i) {
      const auto index = static_cast<int64_t>(i);
      while (auto piece = handles[i]->try_next_piece()) {
        if (piece->prompt) { // the prompt's scores, ahead of the first token: its echo with logprobs
          if (meta.echo_prompt && meta.logprobs) out += event(dump(echo_chunk(meta, index, &*piece->prompt, text_offsets[i])));
          continue;
        }
        // With token ids or logprobs every token gets a chunk, even one that adds no text yet.
        const bool per_token = (token_ids || meta.logprobs) && piece->token >= 0;
        std::vector<json> chunks = answer_chunks(i, piece->text, piece->reasoning);
        if (chunks.empty() && per_token) chunks.push_back(text_chunk(meta, "", false, piece->reasoning, index));
        if (chunks.empty()) continue;
        // A token's ids and logprobs ride on the first chunk its text made.
        json& chunk = chunks.front();
        if (token_ids) chunk["choices"][0]["token_ids"] = piece->token >= 0 ? json::array({piece->token}) : json::array();
        if (meta.logprobs && piece->token >= 0)
          chunk["choices"][0]["logprobs"] =
              logprobs_json(meta, std::span<const int32_t>(&piece->token, 1), std::span<const float>(&piece->logprob, 1),
                            std::span<const std::vector<TokenLogprob>>(&piece->top_logprobs, 1), text_offsets[i]);
        for (const json& c : chunks) out += event(dump(c));
      }
      if (!results[i]) {
        results[i] = handles[i]->try_result();
        if (results[i]) {
          if (auto err = failure(*results[i])) {
            error = err;
          } else {
            std::string finish = results[i]->finish_reason;
            if (!parsers.empty()) {
              for (const ToolCallEvent& e : parsers[i]->finish())
                if (e.kind != ToolCallEvent::Kind::CallEnd) out += event(dump(call_chunk(i, e)));
              finish = chat_finish_reason(finish, parsers[i]->calls());
            }
            out += event(dump(finish_chunk(meta, finish, index)));
          }
        }
      }
      if (results[i]) ++done;
    }
    // One failed choice ends the whole stream with its error; the others are cancelled.
    const bool end = error || done == handles.size();
    if (error) {
      cancel_all();
      out += event(dump(error->body()));
    } else if (end && include_usage) {
      out += event(dump(usage_chunk(meta, finished_results())));
    }
    if (end) out += event("[DONE]");
    if (!out.empty()) ex->send(std::move(out));
    if (end) {
      ended = true;
      ex->end_stream();
    }
  }
};

} // namespace

std::string_view bearer_token(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() < kScheme.size()) return {};
  for (size_t i = 0; i < kScheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return {};
  return authorization.substr(kScheme.size());
}

bool same_secret(std::string_view a, std::string_view b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

Routes::Routes(const LoadedModel& model, serving::Engine& engine, Drain& drain, const ServerMetrics& metrics,
               std::string api_key, std::function<void(std::function<void()>)> defer)
    : model_(model), engine_(engine), drain_(drain), metrics_(metrics), api_key_(std::move(api_key)),
      defer_(std::move(defer)), messages_(model, engine, drain, defer_) {}

void Routes::handle(const HttpRequest& req, const std::shared_ptr<Exchange>& ex) {
  if (req.path == "/health") {
    if (req.method != "GET")
      return ex->reply(405, "application/json", dump(ApiError(405, "use GET /health").body()), "Allow: GET, HEAD\r\n");
    // While draining, a load balancer should stop sending here.
    if (drain_.draining()) return ex->reply(503, "application/json", R"({"status":"draining"})");
    return ex->reply(200, "application/json", R"({"status":"ok"})");
  }
  const bool anthropic = req.path == "/v1/messages" || req.path.starts_with("/v1/messages/");
  // The key as OpenAI's clients send it (a bearer token) or as Anthropic's do (x-api-key).
  if (!api_key_.empty() && !same_secret(bearer_token(req.header("Authorization")), api_key_) &&
      !same_secret(req.header("x-api-key"), api_key_)) {
    const ApiError e(401, "missing or wrong API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'",
                     "invalid_request_error", {}, "invalid_api_key");
    return anthropic ? send_anthropic_error(*ex, e) : send_error(*ex, e);
  }
  const json model{{"id", model_.name}, {"object", "model"}, {"created", 0}, {"owned_by", "ninfer"},
                   {"max_model_len", engine_.max_context()}};
  if (req.method == "GET" && req.path == "/v1/models")
    return ex->reply(200, "application/json", dump(json{{"object", "list"}, {"data", json::array({model})}}));
  // OpenAI's retrieve-model call: the id is the rest of the path (a name may hold '/').
  if (constexpr std::string_view kModel = "/v1/models/"; req.method == "GET" && req.path.starts_with(kModel)) {
    const std::string id = req.path.substr(kModel.size());
    if (id == model_.name) return ex->reply(200, "application/json", dump(model));
    return send_error(*ex, ApiError(404, fmt::format("The model '{}' does not exist: this server serves '{}'", id, model_.name),
                                    "invalid_request_error", "model", "model_not_found"));
  }
  if (req.method == "GET" && req.path == "/metrics")
    return ex->reply(200, "text/plain; version=0.0.4", metrics_.render(engine_, *model_.backend));
  if (req.method == "POST" && req.path == "/v1/chat/completions") return generate(req, ex, true);
  if (req.method == "POST" && req.path == "/v1/completions") return generate(req, ex, false);
  if (req.method == "POST" && req.path == "/v1/messages") return messages_.messages(req, ex);
  if (req.method == "POST" && req.path == "/v1/messages/count_tokens") return messages_.count_tokens(req, ex);
  if (anthropic)
    return send_anthropic_error(*ex, ApiError(404, "no route " + req.method + " " + req.path, "not_found_error"));
  send_error(*ex, ApiError(404, "no route " + req.method + " " + req.path, "invalid_request_error", {}, "unknown_url"));
}

void Routes::generate(const HttpRequest& req, const std::shared_ptr<Exchange>& ex, bool chat) {
  const Endpoint ep = chat ? Endpoint::Chat : Endpoint::Completions;
  try {
    std::shared_ptr<void> in_flight = drain_.enter();
    if (!in_flight) throw ApiError(503, "the server is shutting down", "server_error");
    ParsedRequest p = parse_request(ep, req.body, model_);
    if (!p.options.user.empty()) spdlog::info("{} {} for user '{}'", req.method, req.path, p.options.user);
    auto handles = submit(engine_, chat ? "messages" : "prompt", p);
    auto reply = std::make_shared<Reply>();
    reply->handles = handles;
    reply->ex = ex;
    reply->meta = new_response_meta(ep, model_.name);
    reply->meta.logprobs = p.logprobs;
    reply->meta.reasoning = p.options.reasoning.has_value();
    reply->meta.tokenizer = model_.tok();
    reply->meta.top_logprobs = p.generation.sampling.top_logprobs;
    if (p.echo) reply->meta.echo_prompt = p.generation.prompt_ids;
    if (p.tools.active()) reply->meta.tools = p.tools.parser_options();
    reply->stream = p.stream;
    reply->include_usage = p.include_usage;
    reply->token_ids = p.return_token_ids;
    // Held until the reply's last byte is written (or the client is gone): draining waits.
    ex->hold(std::move(in_flight));
    // A client that leaves cancels its request, queued (its place is freed at once) or running.
    ex->on_disconnect([&engine = engine_, handles] {
      for (auto& h : handles) engine.cancel(*h);
    });
    if (reply->stream) {
      ex->start_stream("text/event-stream");
      // OpenAI opens each choice of a chat stream with the role and empty content.
      if (chat)
        for (int64_t i = 0; i < p.n; ++i) ex->send(event(dump(text_chunk(reply->meta, "", true, false, i))));
      // An echo without logprobs opens each choice at once; with them it waits for the prompt's
      // scores (pump()).
      int64_t no_offset = 0;
      if (p.echo && !p.logprobs)
        for (int64_t i = 0; i < p.n; ++i) ex->send(event(dump(echo_chunk(reply->meta, i, nullptr, no_offset))));
    }
    // The reply lives until it is written (or its client is gone); the engine's notifications
    // hold it only weakly.
    ex->hold(reply);
    std::weak_ptr<Reply> weak = reply;
    for (auto& h : handles)
      h->set_notify([weak, defer = defer_] {
        auto r = weak.lock();
        if (!r || (!r->stream && !r->all_finished())) return;
        defer([r] { r->pump(); });
      });
  } catch (const ApiError& e) {
    send_error(*ex, e);
  } catch (const std::exception& e) {
    spdlog::error("{} {}: {}", req.method, req.path, e.what());
    send_error(*ex, ApiError(500, e.what(), "server_error"));
  }
}

} // namespace ninfer::tools
