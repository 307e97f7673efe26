// ninfer-serve's HTTP surface: /health, /v1/models, /v1/chat/completions, /v1/completions,
// API-key check, and OpenAI-shaped errors for everything that goes wrong (unknown routes too).
#pragma once

#include <httplib.h>

#include <string>

#include "drain.hpp"
#include "loaded_model.hpp"
#include "ninfer/serving/engine.hpp"

namespace ninfer::tools {

// `model`, `engine` and `drain` must outlive the server. An empty `api_key` turns
// authentication off.
void add_routes(httplib::Server& server, const LoadedModel& model, serving::Engine& engine, Drain& drain,
                const std::string& api_key);

} // namespace ninfer::tools
