// What ninfer-run prints after generating: the --json object, and the stderr summary.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "ninfer/generation/generate.hpp"

namespace ninfer::tools {

struct RunContext {
  std::string model;
  std::string device;
  std::string plugin;
  std::vector<int32_t> prompt_ids;
  double load_s = 0;
  size_t peak_device_bytes = 0;
  long peak_rss_kib = 0;
};

nlohmann::json result_json(const RunContext& ctx, const GenerationResult& r);
std::string summary_text(const RunContext& ctx, const GenerationResult& r);
// Speculative rounds' counts: the --json object's "speculation" (drafts per round, rows,
// acceptance by draft position, mean accepted length), and the summary's words for them.
nlohmann::json spec_json(const SpecCounts& s);
std::string spec_text(const SpecCounts& s);

} // namespace ninfer::tools
