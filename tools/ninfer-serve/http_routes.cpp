#include "http_routes.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>

#include "api_error.hpp"
#include "client_socket.hpp"
#include "openai_request.hpp"
#include "openai_response.hpp"

namespace ninfer::tools {
namespace {

using nlohmann::json;

// Generated text is whole UTF-8, but a prompt echo or an odd stop string might not be.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(e.body()), "application/json");
}

std::shared_ptr<serving::RequestHandle> submit(serving::Engine& engine, Endpoint ep, ParsedRequest& p) {
  try {
    return engine.submit(std::move(p.generation), p.options);
  } catch (const serving::PromptTooLong& e) {
    throw ApiError(413, e.what(), "invalid_request_error", ep == Endpoint::Chat ? "messages" : "prompt",
                   "context_length_exceeded");
  } catch (const serving::QueueFull& e) {
    throw ApiError(429, e.what(), "rate_limit_error", {}, "queue_full");
  } catch (const Error& e) {
    throw ApiError(400, e.what());
  }
}

// A request that ended without a normal finish is the server's fault (or shutdown).
std::optional<ApiError> failure(const serving::ServeResult& r) {
  if (r.finish_reason == "error") return ApiError(500, "generation failed: " + r.error, "server_error");
  if (r.finish_reason == "cancelled") return ApiError(503, "the request was cancelled (server shutting down)", "server_error");
  if (r.finish_reason == "timeout")
    return ApiError(503, "timed out waiting for a free slot (--pending-timeout-ms): the server is busy, retry later",
                    "server_error", {}, "queue_timeout");
  return std::nullopt;
}

struct StreamState {
  std::shared_ptr<serving::RequestHandle> handle;
  ResponseMeta meta;
  bool include_usage;
  bool token_ids; // return_token_ids: a chunk per token, with its id
  std::shared_ptr<void> in_flight; // released when the response is gone
  bool started = false;
  int64_t text_offset = 0; // completions logprobs: where the next token's text starts
};

bool write_event(httplib::DataSink& sink, const std::string& data) {
  const std::string event = "data: " + data + "\n\n";
  return sink.write(event.data(), event.size());
}

// Server-sent events: one `data: {chunk}` per text piece, the finish chunk, the usage chunk
// if asked for, then `data: [DONE]`. A failed write means the client left: cancel.
void stream_response(httplib::Response& res, std::shared_ptr<StreamState> st) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [st](size_t, httplib::DataSink& sink) {
        if (!st->started) {
          st->started = true;
          // OpenAI opens a chat stream with the role and empty content.
          if (st->meta.endpoint == Endpoint::Chat && !write_event(sink, dump(text_chunk(st->meta, "", true)))) {
            st->handle->cancel();
            return false;
          }
          return true;
        }
        if (auto piece = st->handle->next_piece()) {
          // With token ids or logprobs every token gets a chunk, even one that adds no text yet.
          const bool per_token = (st->token_ids || st->meta.logprobs) && piece->token >= 0;
          if (piece->text.empty() && !per_token) return true;
          json chunk = text_chunk(st->meta, piece->text, false, piece->reasoning);
          if (st->token_ids)
            chunk["choices"][0]["token_ids"] = piece->token >= 0 ? json::array({piece->token}) : json::array();
          if (st->meta.logprobs && piece->token >= 0)
            chunk["choices"][0]["logprobs"] =
                logprobs_json(st->meta, std::span<const int32_t>(&piece->token, 1),
                              std::span<const float>(&piece->logprob, 1),
                              std::span<const std::vector<TokenLogprob>>(&piece->top_logprobs, 1), st->text_offset);
          if (!write_event(sink, dump(chunk))) {
            st->handle->cancel();
            return false;
          }
          return true;
        }
        const serving::ServeResult r = st->handle->wait();
        if (auto err = failure(r)) {
          write_event(sink, dump(err->body()));
        } else {
          write_event(sink, dump(finish_chunk(st->meta, r.finish_reason)));
          if (st->include_usage) write_event(sink, dump(usage_chunk(st->meta, r)));
        }
        write_event(sink, "[DONE]");
        sink.done();
        return true;
      },
      [st](bool success) {
        if (!success) st->handle->cancel();
      });
}

httplib::Server::Handler generation_handler(const LoadedModel& model, serving::Engine& engine, Drain& drain,
                                            Endpoint ep) {
  return [&model, &engine, &drain, ep](const httplib::Request& req, httplib::Response& res) {
    try {
      std::shared_ptr<void> in_flight = drain.enter();
      if (!in_flight) throw ApiError(503, "the server is shutting down", "server_error");
      ParsedRequest p = parse_request(ep, req.body, model);
      auto handle = submit(engine, ep, p);
      ResponseMeta meta = new_response_meta(ep, model.name);
      meta.logprobs = p.logprobs;
      meta.reasoning = p.options.reasoning.has_value();
      meta.tokenizer = model.tok();
      if (p.stream) {
        stream_response(res, std::make_shared<StreamState>(StreamState{handle, meta, p.include_usage, p.return_token_ids, in_flight}));
        return;
      }
      // Not streamed: nothing is written until the end, so watch the connection instead; a
      // client that hung up cancels its request, which frees its slot (or queue place).
      const int fd = client_socket(req);
      std::optional<serving::ServeResult> done;
      while (!(done = handle->wait_for(std::chrono::milliseconds(50)))) {
        if (fd >= 0 && peer_closed(fd)) {
          handle->cancel();
          spdlog::debug("{} {}: the client closed the connection; request cancelled", req.method, req.path);
          handle->wait();
          return; // nobody to answer
        }
      }
      const serving::ServeResult& r = *done;
      if (auto err = failure(r)) throw *err;
      res.set_content(dump(completion_json(meta, r, p.return_token_ids)), "application/json");
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const std::exception& e) {
      spdlog::error("{} {}: {}", req.method, req.path, e.what());
      send_error(res, ApiError(500, e.what(), "server_error"));
    }
  };
}

} // namespace

void add_routes(httplib::Server& server, const LoadedModel& model, serving::Engine& engine, Drain& drain,
                const std::string& api_key) {
  server.set_pre_routing_handler([api_key](const httplib::Request& req, httplib::Response& res) {
    if (api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + api_key) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError(401, "missing or wrong API key: send 'Authorization: Bearer <key>'",
                             "invalid_request_error", {}, "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404)
      send_error(res, ApiError(404, "no route " + req.method + " " + req.path, "invalid_request_error", {}, "unknown_url"));
    else
      send_error(res, ApiError(res.status, "HTTP " + std::to_string(res.status), "invalid_request_error"));
  });
  server.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  server.Get("/v1/models", [&model, &engine](const httplib::Request&, httplib::Response& res) {
    const json m{{"id", model.name}, {"object", "model"}, {"created", 0}, {"owned_by", "ninfer"},
                 {"max_model_len", engine.max_context()}};
    res.set_content(dump(json{{"object", "list"}, {"data", json::array({m})}}), "application/json");
  });
  server.Post("/v1/chat/completions", generation_handler(model, engine, drain, Endpoint::Chat));
  server.Post("/v1/completions", generation_handler(model, engine, drain, Endpoint::Completions));
}

} // namespace ninfer::tools
