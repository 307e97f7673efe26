#include "request_log.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>

#include "ninfer/support/error.hpp"

namespace ninfer::tools {
namespace {

double rate(double n, double s) { return s > 0 ? n / s : 0.0; }

} // namespace

RequestLog::RequestLog(const std::string& file) : out_(file, std::ios::app), file_(file) {
  if (!out_) throw Error(fmt::format("--request-log {}: cannot open the file for appending", file));
}

void RequestLog::write(const serving::ServeResult& r) {
  const serving::ServeTimings& t = r.timings;
  const auto n = static_cast<double>(r.generated_ids.size());
  const nlohmann::json line{
      {"time", std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()},
      {"finish_reason", r.finish_reason},
      {"error", r.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.error)},
      {"queue_s", t.queue_s},
      {"prompt_tokens", r.prompt_tokens},
      {"cached_tokens", r.cached_tokens},
      {"forked_tokens", r.forked_tokens},
      {"prefill_s", t.prefill_s},
      // Prompt tokens computed, not those read from the slot or copied from the first choice.
      {"prefill_tok_s", rate(static_cast<double>(r.prompt_tokens - r.cached_tokens - r.forked_tokens), t.prefill_s)},
      {"ttft_s", t.first_token_s},
      {"decode_tokens", r.generated_ids.size()},
      {"decode_s", t.decode_s},
      // The first token comes from the prefill; decode speed counts the ones after it.
      {"decode_tok_s", rate(n > 1 ? n - 1 : 0, t.decode_s)},
      // The same moments on the wall clock, to line requests up with each other.
      {"submitted_at", t.submitted_at},
      {"admitted_at", t.admitted_at > 0 ? nlohmann::json(t.admitted_at) : nlohmann::json(nullptr)},
      {"first_token_at", t.first_token_at > 0 ? nlohmann::json(t.first_token_at) : nlohmann::json(nullptr)},
      {"user", r.user.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.user)}};
  nlohmann::json entry = line;
  if (r.spec.rows) {
    nlohmann::json acceptance = nlohmann::json::array();
    for (size_t j = 0; j < r.spec.accepted_at.size(); ++j) acceptance.push_back(r.spec.acceptance(j));
    entry["speculation"] = {{"rows", r.spec.rows},
                            {"acceptance_by_position", acceptance},
                            {"mean_accepted_length", r.spec.mean_accepted_length()}};
  }
  std::lock_guard lock(mu_);
  out_ << entry.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  out_.flush();
}

} // namespace ninfer::tools
