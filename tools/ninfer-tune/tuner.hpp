// The measurement loop of ninfer-tune: for each op, weight dtype, shape and token bucket, every variant the
// planner accepts on this device is checked against the CPU reference (a fast wrong variant is
// excluded) and timed (median of repeats of a recorded burst of launches that stream their
// weights from memory), then each bucket's fastest variant over all the model's shapes is chosen.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "matrix_choice.hpp"
#include "ninfer/runtime/backend.hpp"
#include "quant_layout.hpp"
#include "tune_options.hpp"

namespace ninfer::tools {

// Set by SIGINT / SIGTERM; the tuner stops at the next measurement and nothing is written.
extern std::atomic<bool> g_tune_interrupted;

struct ShapeToTune {
  std::string op;
  ninfer_shape shape{}; // tokens: the most the model runs it with; dtype: the weights'
  std::optional<QuantLayout> quant; // the model's layout of these weights, for a quantized dtype
};

// One op, weight dtype and token bucket: each dtype of an op is tuned on its own (a quantized
// matrix has its own variants) and its table entries name it (ScheduleEntry::dtypes).
struct BucketResult {
  std::string op;
  int32_t dtype = NINFER_DTYPE_F32;      // the weights' (gdn_gating: its inputs')
  int64_t tokens = 0;
  std::string default_variant;           // the built-in choice ("a/b" when shapes differ)
  double default_us = 0;                 // summed over the op's shapes at this bucket
  std::string tuned_variant;             // fastest correct variant legal for every shape
  double tuned_us = 0;
  std::map<std::string, double> all_us;  // every variant measured on every shape
  // Every variant checked against the CPU reference: its worst relative L2 over the shapes
  // (those above OpCase::kTolerance are excluded as WRONG).
  std::map<std::string, double> error;
  std::vector<std::string> excluded;     // "variant: why" (illegal here, or wrong)
  std::vector<MatrixChoice> matrices;    // --by-matrix: matrices routed apart from tuned_variant
  // End to end (confirm_end_to_end): a forward pass of `tokens` tokens under each table.
  double builtin_pass_us = 0, tuned_pass_us = 0;
  bool reverted = false;                 // the tuned choice lost end to end: built-in kept
  // Whether the tuned table routes this bucket differently from the built-in one.
  bool changes_route() const { return !tuned_variant.empty() && (tuned_variant != default_variant || !matrices.empty()); }
};

struct TuneRun {
  std::vector<BucketResult> buckets; // measured ones, in op then token order
  bool budget_exhausted = false;
  double seconds = 0;
};

TuneRun run_tuning(Backend& device, Backend& cpu, const std::vector<ShapeToTune>& shapes, const TuneOptions& o);

} // namespace ninfer::tools
