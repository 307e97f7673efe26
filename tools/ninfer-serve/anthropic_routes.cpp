#include "anthropic_routes.hpp"

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <mutex>

#include "anthropic_request.hpp"
#include "anthropic_response.hpp"
#include "api_error.hpp"
#include "generation_submit.hpp"

namespace ninfer::tools {
namespace {

using nlohmann::json;

std::string new_message_id() {
  static std::atomic<uint64_t> counter{0};
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return "msg_" + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now).count()) + "_" +
         std::to_string(counter++);
}

std::string event(const json& e) { return sse_event(dump(e), e["type"].get<std::string>()); }

// One /v1/messages request between submission and reply; pump() runs on a worker after each
// notification from the engine, the mutex keeping them in order.
struct MessageReply {
  std::shared_ptr<serving::RequestHandle> handle;
  std::shared_ptr<Exchange> ex;
  std::string id, model;
  bool stream = false;
  int64_t input_tokens = 0;
  std::vector<std::string> stop_sequences;
  const Tokenizer* tokenizer = nullptr;
  std::optional<MessageBlocks> blocks;
  std::mutex mutex;
  bool ended = false;

  void pump() {
    std::lock_guard lock(mutex);
    if (ended) return;
    if (!stream) {
      auto r = handle->wait_for(std::chrono::milliseconds(0));
      if (!r) return;
      ended = true;
      if (auto err = failure(*r)) return send_anthropic_error(*ex, *err);
      // The same blocks a stream makes, from the whole text.
      blocks->push(r->reasoning, true);
      blocks->push(r->text, false);
      blocks->finish();
      const auto output = static_cast<int64_t>(r->generated_ids.size());
      const StopReason stop = stop_reason(*r, blocks->tool_uses(), stop_sequences, tokenizer);
      ex->reply(200, "application/json",
                dump(message_json(id, model, blocks->content(), stop, {input_tokens, r->cached_tokens, output})));
      return;
    }
    std::string out;
    while (auto piece = handle->try_next_piece())
      for (const json& e : blocks->push(piece->text, piece->reasoning)) out += event(e);
    if (auto r = handle->try_result()) {
      ended = true;
      if (auto err = failure(*r)) {
        handle->cancel();
        out += sse_event(dump(anthropic_error(*err).body), "error");
      } else {
        for (const json& e : blocks->finish()) out += event(e);
        const StopReason stop = stop_reason(*r, blocks->tool_uses(), stop_sequences, tokenizer);
        out += event(message_delta_event(
            stop, {input_tokens, r->cached_tokens, static_cast<int64_t>(r->generated_ids.size())}));
        out += event(message_stop_event());
      }
    }
    if (!out.empty()) ex->send(std::move(out));
    if (ended) ex->end_stream();
  }
};

} // namespace

void send_anthropic_error(Exchange& ex, const ApiError& e) {
  const AnthropicError a = anthropic_error(e);
  ex.reply(a.status, "application/json", dump(a.body), retry_after_header(a.status));
}

MessagesRoute::MessagesRoute(const LoadedModel& model, serving::Engine& engine, Drain& drain,
                             std::function<void(std::function<void()>)> defer)
    : model_(model), engine_(engine), drain_(drain), defer_(std::move(defer)) {}

void MessagesRoute::count_tokens(const HttpRequest& req, const std::shared_ptr<Exchange>& ex) {
  try {
    const MessagesRequest m = parse_messages_request(req.body, model_, true);
    ex->reply(200, "application/json", dump(json{{"input_tokens", m.request.generation.prompt_ids.size()}}));
  } catch (const ApiError& e) {
    send_anthropic_error(*ex, e);
  } catch (const std::exception& e) {
    spdlog::error("{} {}: {}", req.method, req.path, e.what());
    send_anthropic_error(*ex, ApiError(500, e.what(), "server_error"));
  }
}

void MessagesRoute::messages(const HttpRequest& req, const std::shared_ptr<Exchange>& ex) {
  try {
    std::shared_ptr<void> in_flight = drain_.enter();
    if (!in_flight) throw ApiError(503, "the server is shutting down", "server_error");
    MessagesRequest m = parse_messages_request(req.body, model_, false);
    ParsedRequest& p = m.request;
    if (!p.options.user.empty()) spdlog::info("{} {} for user '{}'", req.method, req.path, p.options.user);
    auto handles = submit(engine_, "messages", p);
    auto reply = std::make_shared<MessageReply>();
    reply->handle = handles.front();
    reply->ex = ex;
    reply->id = new_message_id();
    reply->model = model_.name;
    reply->stream = p.stream;
    reply->input_tokens = static_cast<int64_t>(p.generation.prompt_ids.size());
    reply->stop_sequences = m.stop_sequences;
    reply->tokenizer = model_.tok();
    reply->blocks.emplace(p.tools.active() ? std::optional(p.tools.parser_options()) : std::nullopt);
    ex->hold(std::move(in_flight));
    ex->on_disconnect([&engine = engine_, h = reply->handle] { engine.cancel(*h); });
    if (reply->stream) {
      ex->start_stream("text/event-stream");
      ex->send(event(message_start_event(reply->id, reply->model, reply->input_tokens)));
    }
    ex->hold(reply);
    std::weak_ptr<MessageReply> weak = reply;
    reply->handle->set_notify([weak, defer = defer_] {
      auto r = weak.lock();
      if (!r || (!r->stream && !r->handle->finished())) return;
      defer([r] { r->pump(); });
    });
  } catch (const ApiError& e) {
    send_anthropic_error(*ex, e);
  } catch (const std::exception& e) {
    spdlog::error("{} {}: {}", req.method, req.path, e.what());
    send_anthropic_error(*ex, ApiError(500, e.what(), "server_error"));
  }
}

} // namespace ninfer::tools
