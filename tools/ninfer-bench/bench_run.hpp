// The measurements: prefill of prompts of given lengths, and decode steps of batches of
// sequences at given context depths, each after warm-up, repeated, as median / min / max.
#pragma once

#include <cstdint>
#include <vector>

#include "bench_options.hpp"
#include "ninfer/generation/generate.hpp"
#include "ninfer/models/causal_lm.hpp"
#include "rooflines.hpp"

namespace ninfer::tools {

struct Spread {
  double median = 0, min = 0, max = 0;
};

struct BenchPoint {
  bool prefill = false;
  int64_t tokens = 0;  // prefill: prompt length
  int64_t context = 0; // decode: depth before the timed steps
  int32_t batch = 1;   // decode: sequences per step
  Spread tok_s;        // aggregate tokens per second
  double roofline_tok_s = 0;
  SpecCounts spec;     // decode with speculation: the timed rounds' rows
};

// Drops the points a model of `positions` positions cannot hold (saying so on stderr); throws
// ninfer::Error when none is left. positions <= 0: no limit.
void fit_to_model(BenchOptions& o, int64_t positions);

// The context and slots the measurements need (the model is loaded with these).
int64_t needed_context(const BenchOptions& o);
int32_t needed_sequences(const BenchOptions& o);

std::vector<BenchPoint> run_benchmarks(CausalLM& lm, const BenchOptions& o, const ModelCosts& costs,
                                       const DeviceRates& rates);

} // namespace ninfer::tools
