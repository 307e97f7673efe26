#include "run_report.hpp"

#include <fmt/format.h>

namespace ninfer::tools {
namespace {

nlohmann::json pairs(const std::vector<TokenLogprob>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& p : v) a.push_back({p.id, p.logprob});
  return a;
}

double rate(size_t n, double s) { return s > 0 ? static_cast<double>(n) / s : 0.0; }

} // namespace

nlohmann::json spec_json(const SpecCounts& s) {
  nlohmann::json acceptance = nlohmann::json::array();
  for (size_t j = 0; j < s.accepted_at.size(); ++j) acceptance.push_back(s.acceptance(j));
  return {{"draft_tokens", s.accepted_at.size()},
          {"rows", s.rows},
          {"acceptance_by_position", acceptance},
          {"mean_accepted_length", s.mean_accepted_length()}};
}

std::string spec_text(const SpecCounts& s) {
  std::string by_position;
  for (size_t j = 0; j < s.accepted_at.size(); ++j) by_position += fmt::format("{}{:.2f}", j ? " " : "", s.acceptance(j));
  return fmt::format("{} rounds of {} drafts, acceptance by position {}, mean accepted length {:.2f}", s.rows,
                     s.accepted_at.size(), by_position, s.mean_accepted_length());
}

nlohmann::json result_json(const RunContext& ctx, const GenerationResult& r) {
  nlohmann::json j;
  j["model"] = ctx.model;
  j["device"] = ctx.device;
  j["plugin"] = ctx.plugin;
  j["prompt_ids"] = ctx.prompt_ids;
  j["generated_ids"] = r.generated_ids;
  j["text"] = r.text;
  j["finish_reason"] = r.finish_reason;
  j["stop_string"] = r.stop_string ? nlohmann::json(*r.stop_string) : nlohmann::json(nullptr);
  j["stop_token"] = r.stop_token ? nlohmann::json(*r.stop_token) : nlohmann::json(nullptr);
  j["seed"] = r.seed;
  j["generated_logprobs"] = r.generated_logprobs;
  if (!r.generated_top.empty()) {
    nlohmann::json g = nlohmann::json::array();
    for (const auto& step : r.generated_top) g.push_back(pairs(step));
    j["generated_top_logprobs"] = g;
  }
  if (!r.prompt_top.empty()) {
    nlohmann::json p = nlohmann::json::array();
    for (const auto& pos : r.prompt_top) p.push_back(pairs(pos));
    j["prompt_top_logprobs"] = p;
    j["prompt_logprobs"] = r.prompt_logprobs; // of prompt tokens 1.., after the ones before
  }
  j["timings"] = {{"load_s", ctx.load_s},
                  {"prefill_s", r.timings.prefill_s},
                  {"first_token_s", r.timings.first_token_s},
                  {"decode_s", r.timings.decode_s},
                  {"sampling_s", r.timings.sampling_s},
                  {"prompt_tokens", ctx.prompt_ids.size()},
                  {"generated_tokens", r.generated_ids.size()},
                  {"prefill_tok_s", rate(ctx.prompt_ids.size(), r.timings.prefill_s)},
                  {"decode_tok_s", rate(r.generated_ids.size() > 1 ? r.generated_ids.size() - 1 : 0, r.timings.decode_s)},
                  {"peak_device_bytes", ctx.peak_device_bytes},
                  {"peak_rss_kib", ctx.peak_rss_kib}};
  if (r.spec.rows) j["speculation"] = spec_json(r.spec);
  return j;
}

std::string summary_text(const RunContext& ctx, const GenerationResult& r) {
  const size_t decoded = r.generated_ids.size() > 1 ? r.generated_ids.size() - 1 : 0;
  return fmt::format(
      "[ninfer-run] {} on {} ({}): load {:.2f} s | prompt {} tokens, prefill {:.1f} tok/s | generated {} tokens, "
      "decode {:.1f} tok/s, first token {:.3f} s | finish: {} | peak memory: {:.1f} MiB on the device, {:.1f} MiB "
      "RSS | seed {}{}\n",
      ctx.model, ctx.device, ctx.plugin, ctx.load_s, ctx.prompt_ids.size(), rate(ctx.prompt_ids.size(), r.timings.prefill_s),
      r.generated_ids.size(), rate(decoded, r.timings.decode_s), r.timings.first_token_s, r.finish_reason,
      ctx.peak_device_bytes / 1048576.0, ctx.peak_rss_kib / 1024.0, r.seed,
      r.spec.rows ? " | speculation: " + spec_text(r.spec) : std::string());
}

} // namespace ninfer::tools
