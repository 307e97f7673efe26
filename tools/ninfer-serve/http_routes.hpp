// ninfer-serve's HTTP surface: /health, /metrics, /v1/models, /v1/chat/completions,
// /v1/completions, Anthropic's /v1/messages and /v1/messages/count_tokens, the API-key check,
// and errors for everything that goes wrong (unknown routes too): Anthropic-shaped under
// /v1/messages, OpenAI-shaped elsewhere. Generation requests never block a thread while they wait: the
// engine's notifications move their replies along, and a client that leaves cancels its
// request wherever it is (queued, prefilling or decoding).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "anthropic_routes.hpp"
#include "drain.hpp"
#include "http_server.hpp"
#include "loaded_model.hpp"
#include "metrics.hpp"
#include "ninfer/serving/engine.hpp"

namespace ninfer::tools {

// Whether two strings are equal, in a time that depends on their lengths only (API keys).
bool same_secret(std::string_view a, std::string_view b);
// The token of an `Authorization: Bearer TOKEN` header, the scheme in any case (RFC 9110); "" for
// any other header.
std::string_view bearer_token(std::string_view authorization);

class Routes {
 public:
  // Everything passed must outlive the routes. An empty `api_key` turns authentication off.
  // `defer` runs a task on a worker thread (the engine notifies from its scheduler thread).
  Routes(const LoadedModel& model, serving::Engine& engine, Drain& drain, const ServerMetrics& metrics,
         std::string api_key, std::function<void(std::function<void()>)> defer);

  void handle(const HttpRequest& req, const std::shared_ptr<Exchange>& ex);

 private:
  void generate(const HttpRequest& req, const std::shared_ptr<Exchange>& ex, bool chat);

  const LoadedModel& model_;
  serving::Engine& engine_;
  Drain& drain_;
  const ServerMetrics& metrics_;
  std::string api_key_;
  std::function<void(std::function<void()>)> defer_;
  MessagesRoute messages_;
};

} // namespace ninfer::tools
