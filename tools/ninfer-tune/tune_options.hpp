// ninfer-tune's command line: the model whose shapes are tuned, the device, which ops and
// token-count buckets, and how long to spend.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace ninfer::tools {

struct TuneOptions {
  std::string preset, manifest, checkpoint; // the model (shapes only; weights are drawn)
  std::string weights = "bfloat16"; // a preset's decoder linears: bfloat16, int4-g128, fp8, ... (preset_weights.hpp)
  std::string device = "auto"; // as every tool: the first GPU, else the CPU
  std::string plugin_dir, plugin;
  std::vector<std::string> ops{"linear", "norm_linear", "gdn_gating"};
  std::vector<int64_t> buckets; // empty: 1, 2, 4 ... up to --prefill-chunk
  int32_t prefill_chunk = 4096;
  int32_t repeats = 5;
  double budget_seconds = 900;
  std::string out; // empty: the tuned-table path for this device (docs/tuning.md)
  bool dry_run = false;
  bool no_confirm = false; // skip the end-to-end check of the tuned choices
  // Also time run-time compiled linear variants (jit_gemv_*, NVRTC) at decode buckets (<= 8
  // tokens). Off by default: it needs NVRTC here and wherever the table is used (docs/tuning.md).
  bool jit_sweep = false;
  // Also route single matrices of a bucket to their own fastest variant where it beats the
  // bucket's choice on that matrix by more than kMatrixMargin (schedule entries with dims).
  bool by_matrix = false;
  bool json = false;
  bool verbose = false;
};

void add_tune_options(CLI::App& app, TuneOptions& o);
// Throws ninfer::Error for unusable values; fills the default buckets.
void check_tune_options(TuneOptions& o);

} // namespace ninfer::tools
