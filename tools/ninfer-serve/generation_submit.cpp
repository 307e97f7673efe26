#include "generation_submit.hpp"

#include <fmt/format.h>

namespace ninfer::tools {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse_event(const std::string& data, const std::string& name) {
  return (name.empty() ? "" : "event: " + name + "\n") + "data: " + data + "\n\n";
}

// The choices are queued together (Engine::submit): the prompt is read once, and a seeded
// request gives choice i the seed + i, so the choices differ and each is reproducible.
std::vector<std::shared_ptr<serving::RequestHandle>> submit(serving::Engine& engine, const std::string& prompt_field,
                                                            ParsedRequest& p) {
  // A limit the context cannot hold is refused up front (as vLLM does) rather than cut short
  // where the context fills; a prompt alone too long is the engine's 413 below. Both counts are
  // in [0, 2^63), so their sum is exact in 64 unsigned bits.
  const int64_t prompt = static_cast<int64_t>(p.generation.prompt_ids.size());
  const int64_t ctx = engine.max_context();
  const int64_t asked = p.generation.max_new_tokens;
  if (!p.max_tokens_field.empty() && prompt < ctx && asked > ctx - prompt)
    throw ApiError(400,
                   fmt::format("this model's context holds {} tokens, but the request asks for {} ({} in the {}, {} "
                               "{}): set {} to at most {}",
                               ctx, static_cast<uint64_t>(prompt) + static_cast<uint64_t>(asked), prompt, prompt_field,
                               p.max_tokens_field, asked, p.max_tokens_field, ctx - prompt),
                   "invalid_request_error", p.max_tokens_field, "context_length_exceeded");
  try {
    return engine.submit(p.generation, p.options, p.n);
  } catch (const serving::PromptTooLong& e) {
    throw ApiError(413, e.what(), "invalid_request_error", prompt_field, "context_length_exceeded");
  } catch (const serving::TooManyChoices& e) {
    throw ApiError(400, e.what(), "invalid_request_error", "n");
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

} // namespace ninfer::tools
