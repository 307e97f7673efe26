// The Anthropic Messages API: POST /v1/messages (whole or streamed) and
// POST /v1/messages/count_tokens, answered from the same engine as the OpenAI routes. Errors
// are in Anthropic's shape ({"type": "error", "error": {"type", "message"}}).
#pragma once

#include <functional>
#include <memory>

#include "drain.hpp"
#include "http_server.hpp"
#include "loaded_model.hpp"
#include "ninfer/serving/engine.hpp"

namespace ninfer::tools {

struct ApiError;

// Writes `e` as an Anthropic error reply.
void send_anthropic_error(Exchange& ex, const ApiError& e);

class MessagesRoute {
 public:
  // Everything passed must outlive the route; `defer` runs a task on a worker thread.
  MessagesRoute(const LoadedModel& model, serving::Engine& engine, Drain& drain,
                std::function<void(std::function<void()>)> defer);

  void messages(const HttpRequest& req, const std::shared_ptr<Exchange>& ex);
  void count_tokens(const HttpRequest& req, const std::shared_ptr<Exchange>& ex);

 private:
  const LoadedModel& model_;
  serving::Engine& engine_;
  Drain& drain_;
  std::function<void(std::function<void()>)> defer_;
};

} // namespace ninfer::tools
