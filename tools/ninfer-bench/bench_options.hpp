// ninfer-bench's command line: what to load (a shape preset with seeded weights, a manifest or
// a checkpoint), where, and which prefill / decode points to measure.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ninfer/models/model_setup.hpp"
#include "ninfer/sampling/sampling_params.hpp"

namespace ninfer::tools {

struct BenchOptions {
  std::string preset;     // a shape preset (random weights drawn on the device)
  std::string manifest;   // or a manifest
  std::string checkpoint; // or a checkpoint folder
  bool list_presets = false;
  bool print_config = false; // print the preset's config.json (for other tools) and exit
  std::string device = "auto";
  std::string plugin_dir, plugin;
  std::string dtype = "bfloat16"; // weights of a preset; a manifest's own dtype otherwise unless given
  bool dtype_given = false;
  std::string weights = "bfloat16"; // a preset's decoder linears: bfloat16, int4-g128, fp8, ... (preset_weights.hpp)
  std::string mtp_weights = "bfloat16"; // a preset's MTP head linears (with --spec mtp), the same forms
  std::optional<std::string> kv_dtype; // KV cache elements; unset: a preset's auto, a manifest's own
  std::optional<double> memory_limit;     // --memory-limit GIB (docs/memory.md)
  std::optional<std::string> kv_capacity; // --kv-capacity auto|TOKENS
  std::optional<int64_t> kv_block_tokens; // --kv-block-tokens N
  SpecOverrides spec; // --spec none|mtp (decode points run speculative rounds), --draft-tokens, --draft-vocab
  // --spec-acceptance P: each round keeps its drafts one by one with probability P (the first
  // refusal ends the row's run), whatever they were: the engine's cost at acceptance P
  std::optional<double> spec_acceptance;
  // --spec-verify-only: rounds run their verification pass alone (no MTP head pass): with
  // --spec-acceptance 0, a sequence gains one token a round, so decode tok/s against plain
  // decode's gives the verification pass's cost
  bool spec_verify_only = false;
  // --temperature, --top-k, --top-p, --min-p: decode points pick with the sample op under these
  // settings (temperature 0, the default: greedy, the argmax op)
  SamplingParams sampling{.temperature = 0};
  uint64_t seed = 0;
  std::vector<int64_t> prompt_lengths{512, 2048, 8192, 32768};
  std::vector<int64_t> contexts{0, 4096, 32768};
  std::vector<int64_t> batches{1, 2, 4, 8};
  int32_t prefill_chunk = 4096;
  int32_t decode_steps = 32; // timed steps per repeat
  int32_t warmup = 1;        // untimed runs (prefill) / untimed steps x 4 (decode) before timing
  int32_t repeats = 3;       // timed repeats; the median is reported with min and max
  bool skip_prefill = false, skip_decode = false;
  bool no_cuda_graph = false;
  bool json = false;
  bool verbose = false;
  std::optional<int> threads; // the CPU plugin's
  bool points_given = false;  // --prompt-lengths, --contexts, --batches or --decode-steps given
};

// The points measured on a CPU when none is given: the GPU defaults (a 32,768-token prefill)
// would run for hours there. A --device cpu run, a CPU preset (the random-checkpoint presets)
// or --device auto on a machine without a GPU takes them.
inline const std::vector<int64_t> kCpuPromptLengths{64, 256};
inline const std::vector<int64_t> kCpuContexts{0, 256};
inline const std::vector<int64_t> kCpuBatches{1, 2};
inline constexpr int32_t kCpuDecodeSteps = 8;
// Whether `o` is a CPU run in that sense.
bool benches_cpu(const BenchOptions& o);
void use_cpu_points(BenchOptions& o);

void add_bench_options(CLI::App& app, BenchOptions& o);
// Throws ninfer::Error for values that cannot be measured (empty lists, non-positive sizes).
void check_bench_options(const BenchOptions& o);

} // namespace ninfer::tools
