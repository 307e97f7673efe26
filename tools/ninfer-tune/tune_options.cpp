#include "tune_options.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ninfer/devices/device.hpp"
#include "ninfer/planning/op_catalog.hpp"
#include "ninfer/support/error.hpp"
#include "preset_weights.hpp"
#include "tool_cli.hpp"

namespace ninfer::tools {

void add_tune_options(CLI::App& app, TuneOptions& o) {
  auto* manifest = app.add_option("manifest", o.manifest, "Model manifest whose shapes are tuned");
  auto* preset = app.add_option("--preset", o.preset, "Shape preset (see ninfer-bench --list-presets)");
  auto* ck = app.add_option("--checkpoint", o.checkpoint, "Hugging Face checkpoint folder whose shapes are tuned");
  preset->excludes(manifest)->excludes(ck);
  manifest->excludes(ck);
  app.add_option("--weights", o.weights,
                 "A preset's decoder linears: bfloat16, int4-g128, int8-g128 (any gN), int4-channel, int8-channel, fp8 "
                 "(128-column blocks), drawn as ninfer-bench draws them; their linears are tuned under their own dtype")
      ->capture_default_str()
      ->excludes(manifest)
      ->excludes(ck);
  app.add_option("--device", o.device, "auto (the first GPU, else the CPU), cuda, cuda:N or cpu")->capture_default_str();
  app.add_option("--plugin-dir", o.plugin_dir, "Plugin directory (default: $NINFER_PLUGIN_DIR, else the install's)");
  app.add_option("--plugin", o.plugin, "Tune this plugin (default: the best-scoring one)");
  app.add_option("--ops", o.ops, "Ops to tune")->delimiter(',')->capture_default_str();
  app.add_option("--buckets", o.buckets, "Token counts to measure (default: 1, 2, 4 ... --prefill-chunk)")
      ->delimiter(',');
  app.add_option("--prefill-chunk", o.prefill_chunk, "Largest token count of a forward pass")->capture_default_str();
  app.add_option("--repeats", o.repeats, "Timed repeats per variant (median)")->capture_default_str();
  app.add_option("--budget-seconds", o.budget_seconds,
                 "Stop measuring after this long; unmeasured buckets keep the built-in choice")
      ->capture_default_str();
  app.add_option("--out", o.out, "Write the table here (default: the cache path the engine reads, docs/tuning.md)");
  app.add_flag("--dry-run", o.dry_run, "Measure and report, write nothing");
  app.add_flag("--no-confirm", o.no_confirm,
               "Skip the end-to-end check (a forward pass per changed bucket under both tables)");
  app.add_flag("--jit-sweep", o.jit_sweep,
               "Also time run-time compiled linear variants (NVRTC: jit_gemv_*, 12 per bucket of <= 8 tokens); "
               "a winner is written by name and compiled (or taken from the kernel cache) when an engine starts");
  app.add_flag("--by-matrix", o.by_matrix,
               "Also give a matrix its own entry (dims ranges) where its fastest variant beats the bucket's "
               "choice on it by more than 3%");
  app.add_flag("--json", o.json, "Print one JSON object instead of the table");
  app.add_flag("-v,--verbose", o.verbose, "Debug logging on stderr");
}

void check_tune_options(TuneOptions& o) {
  if (o.preset.empty() && o.manifest.empty() && o.checkpoint.empty())
    throw UsageError("no model: give --preset NAME, a manifest or --checkpoint DIR (its shapes are tuned)");
  if (o.weights != "bfloat16" && o.weights != "bf16" && o.preset.empty())
    throw UsageError("--weights draws a preset's quantized weights: a checkpoint or manifest brings its own");
  parse_weights_spec(o.weights);
  if (o.prefill_chunk < 1 || o.repeats < 1 || o.budget_seconds <= 0)
    throw UsageError("--prefill-chunk and --repeats must be >= 1, --budget-seconds > 0");
  std::erase(o.ops, std::string{}); // `--ops ''` or `--ops linear,` name no op there
  if (o.ops.empty()) throw UsageError("--ops needs at least one op");
  for (const std::string& op : o.ops)
    if (!find_op(op)) throw UsageError(fmt::format("--ops: unknown op '{}' (ninfer-info --list-ops lists them)", op));
  try {
    parse_device_spec(o.device);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  if (o.buckets.empty())
    for (int64_t b = 1; b <= o.prefill_chunk; b *= 2) o.buckets.push_back(b);
  for (int64_t b : o.buckets)
    if (b < 1 || b > o.prefill_chunk)
      throw UsageError(fmt::format("--buckets: {} is outside [1, --prefill-chunk = {}]", b, o.prefill_chunk));
  std::sort(o.buckets.begin(), o.buckets.end());
  o.buckets.erase(std::unique(o.buckets.begin(), o.buckets.end()), o.buckets.end());
}

} // namespace ninfer::tools
