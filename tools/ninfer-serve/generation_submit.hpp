// What every generation route shares: handing a parsed request to the engine (all its choices
// or none), turning a request that ended badly into an error, and writing JSON and SSE events.
// Errors are ApiErrors; each API writes them in its own shape.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api_error.hpp"
#include "ninfer/serving/engine.hpp"
#include "openai_request.hpp"

namespace ninfer::tools {

// Generated text is whole UTF-8, but a prompt echo or an odd stop string might not be: such
// bytes become U+FFFD rather than an exception.
std::string dump(const nlohmann::json& j);

// One server-sent event: `data: DATA`, with an `event: NAME` line first when `name` is given.
std::string sse_event(const std::string& data, const std::string& name = {});

// Submits the request's `n` choices, all or none, which read the prompt once (Engine::submit).
// `prompt_field` names the field the prompt came from in errors ("messages", "prompt"). Throws
// ApiError: 400 when max_tokens does not fit the context, 413 for a prompt too long, 429 when
// the queue cannot take every choice.
std::vector<std::shared_ptr<serving::RequestHandle>> submit(serving::Engine& engine, const std::string& prompt_field,
                                                            ParsedRequest& p);

// A request that ended without a normal finish: the server's fault (500), or shutdown or a
// queue timeout (503).
std::optional<ApiError> failure(const serving::ServeResult& r);

} // namespace ninfer::tools
