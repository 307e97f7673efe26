// What ninfer-bench prints: the setup (model, device, plugin, load time, memory, rooflines),
// one row per measured point as a fraction of its roofline, and the variants / schedule
// entries the planner used. A table for people, one JSON object for machines.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bench_run.hpp"
#include "ninfer/runtime/backend.hpp"

namespace ninfer::tools {

struct VariantUse {
  std::string op, variant, source; // source: "planner" or the schedule entry's FILE:LINE
  int shapes = 0;                  // distinct shapes planned this way
};

struct BenchSetup {
  std::string model, family, weights_dtype, kv_dtype, device, plugin;
  int32_t kv_block_tokens = 0; // positions per KV block
  bool random_weights = false;
  bool cuda_graphs = false;
  size_t graphs_recorded = 0;
  int64_t max_context = 0;
  int32_t max_sequences = 0;
  double load_seconds = 0;
  MemoryReport memory;
  size_t plan_allocated = 0, plan_total = 0; // the load's memory plan: its exact parts, and with its estimates
  size_t device_taken = 0;                   // ModelOnDevice::device_taken
  std::optional<double> spec_acceptance;     // --spec-acceptance: the rounds' acceptance was forced
  bool spec_verify_only = false;             // --spec-verify-only: rounds ran no MTP head pass
  SamplingParams sampling{.temperature = 0}; // the decode points' picks (temperature 0: greedy)
  int64_t draft_vocab = 0;                   // token ids the drafter picks among (the vocabulary: all)
  const char* draft_head = "lm_head";        // the drafter's LM head rows: lm_head or int4
  DeviceRates rates;
  ModelCosts costs;
  std::vector<VariantUse> variants;
};

// Groups the backend's cached plans by (op, variant, source).
std::vector<VariantUse> variants_used(const Backend& be);

void print_table(const BenchSetup& s, const std::vector<BenchPoint>& points);
void print_json(const BenchSetup& s, const std::vector<BenchPoint>& points);

} // namespace ninfer::tools
