// ninfer-info --fit: the memory plan of a checkpoint folder, a manifest or a shape preset on a
// live or described device (docs/memory.md), and the longest context that fits at each
// concurrency; as text and as JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ninfer/abi/device_info.h"
#include "ninfer/checkpoint/model_config.hpp"
#include "ninfer/models/memory_plan.hpp"
#include "ninfer/models/model_setup.hpp"

namespace ninfer::tools {

struct FitRequest {
  std::string source;               // a checkpoint folder or a manifest file (empty with a preset)
  std::string preset;               // a shape preset (ninfer-bench --list-presets)
  std::string weights = "bfloat16"; // a preset's decoder linears (preset_weights.hpp)
  std::string mtp_weights = "bfloat16"; // a preset's MTP head linears (with --spec mtp)
  SpecOverrides spec;               // --spec, --draft-tokens, --draft-vocab: the head and its states planned
  std::string device = "auto";      // a live device (--device)
  std::string device_model;         // or a described card (--device-model)
  std::optional<double> memory_gib; // the card's memory instead of its table's, or a limit on a live device
  std::optional<std::string> kv_dtype;
  std::optional<int64_t> concurrency, max_context, prefill_chunk;
  std::string plugin_dir, plugin;
};

struct FitRow {
  int32_t concurrency = 0;
  int64_t max_context = 0; // the longest that fits, at most the model's positions
  int64_t kv_tokens = 0;
  bool fits = false;
};

struct FitResult {
  std::string source; // what was planned, for the report
  ModelConfig config;
  ninfer_device_info device{};
  std::string plugin; // whose planner sized the workspace
  MemoryPlan plan;    // at the asked concurrency (and max_context, when given)
  // KV bytes per token of each kv_dtype the model's head_dim takes (kv_append.h), elements
  // and scales: ("float32", n), ("float16", n), ("bfloat16", n), ("int8", n), ...
  std::vector<std::pair<std::string, size_t>> kv_per_token;
  std::vector<FitRow> by_concurrency;   // 1, 2, 4, ... until one does not fit (none without a bound)
};

// Throws ninfer::Error for a source, device or plugin that cannot be planned.
FitResult fit(const FitRequest& r);
std::string fit_text(const FitResult& f);
nlohmann::json fit_json(const FitResult& f);

} // namespace ninfer::tools
