#include "bench_options.hpp"

#include <fmt/format.h>

#include "preset_weights.hpp"
#include "ninfer/checkpoint/random_checkpoint.hpp"
#include "ninfer/devices/device.hpp"
#include "ninfer/support/error.hpp"
#include "tool_cli.hpp"

namespace ninfer::tools {

void add_bench_options(CLI::App& app, BenchOptions& o) {
  auto* manifest = app.add_option("manifest", o.manifest, "Model manifest (real weights; instead of --preset)");
  auto* preset = app.add_option("--preset", o.preset,
                                "Shape preset with seeded random weights made on the device: qwen3-0.6b, qwen3-8b, "
                                "qwen3-32b, qwen3_5-27b, ... (--list-presets)");
  auto* ck = app.add_option("--checkpoint", o.checkpoint, "Hugging Face checkpoint folder (real weights)");
  preset->excludes(manifest)->excludes(ck);
  manifest->excludes(ck);
  app.add_flag("--list-presets", o.list_presets, "List the shape presets and exit");
  app.add_flag("--print-config", o.print_config,
               "Print the --preset's config.json (Hugging Face form) and exit: other tools build the same shape");
  app.add_option("--device", o.device, "cpu, cuda, cuda:N or auto")->capture_default_str();
  app.add_option("--plugin-dir", o.plugin_dir, "Plugin directory (default: $NINFER_PLUGIN_DIR, else the install's)");
  app.add_option("--plugin", o.plugin, "Use this plugin (it must support the device)");
  app.add_option("--dtype", o.dtype, "Weights: bfloat16 (default for presets), float32, auto (manifests)")
      ->each([&](const std::string&) { o.dtype_given = true; });
  auto* weights = app.add_option(
      "--weights", o.weights,
      "A preset's decoder linears: bfloat16 (as --dtype), int4-g128, int8-g128 (any gN), int4-channel, int8-channel, "
      "fp8 (128-column blocks); the modules a default ninfer-quantize run quantizes, codes drawn on the device");
  weights->capture_default_str()->excludes(manifest)->excludes(ck);
  app.add_option("--kv-dtype", o.kv_dtype,
                 "KV cache: auto (float16 on CUDA, float32 on CPU), float32, float16, bfloat16, int8, fp8, int4r (default: a preset's "
                 "auto, a manifest's own)");
  add_memory_options(app, o.memory_limit, o.kv_capacity);
  app.add_option("--kv-block-tokens", o.kv_block_tokens,
                 "Positions per KV block: 32, 64, 128, 256, 512 or 1024 (default: a manifest's runtime.kv_block_tokens, "
                 "else 64; docs/memory.md)")
      ->check(CLI::IsMember({32, 64, 128, 256, 512, 1024}));
  add_spec_options(app, o.spec);
  app.add_option("--mtp-weights", o.mtp_weights,
                 "With --spec mtp on a preset: the MTP head's linears (mtp.fc and its layer's projections), in "
                 "--weights' forms; default bfloat16, as a default ninfer-quantize run leaves the head")
      ->capture_default_str()
      ->excludes(manifest)
      ->excludes(ck);
  app.add_option("--spec-acceptance", o.spec_acceptance,
                 "With --spec mtp: each round keeps its drafts one by one with probability P (0..1), whatever they "
                 "are, so decode tok/s is the engine's at that acceptance (random weights accept no drafts); the "
                 "tokens produced mean nothing");
  app.add_flag("--spec-verify-only", o.spec_verify_only,
               "With --spec mtp: rounds run their verification pass alone, no MTP head pass (they verify stale "
               "drafts); with --spec-acceptance 0 a round gains one token per sequence, so plain decode's tok/s "
               "over this one is the verification pass's cost in decode steps");
  app.add_option("--temperature", o.sampling.temperature,
                 "Decode points pick their tokens with the device's sampler at this temperature (0: greedy, the "
                 "argmax op)")
      ->capture_default_str();
  app.add_option("--top-k", o.sampling.top_k, "With --temperature: keep the K most likely tokens (0: off)")
      ->capture_default_str();
  app.add_option("--top-p", o.sampling.top_p, "With --temperature: nucleus sampling's probability mass (1: off)")
      ->capture_default_str();
  app.add_option("--min-p", o.sampling.min_p, "With --temperature: drop tokens below min-p x the top probability (0: off)")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of a preset's weights, of the prompts and of the sampler's draws")
      ->capture_default_str();
  auto given = [&o](const auto&) { o.points_given = true; };
  app.add_option("--prompt-lengths", o.prompt_lengths, "Prefill points (tokens; on a CPU: 64,256)")
      ->delimiter(',')->capture_default_str()->each(given);
  app.add_option("--contexts", o.contexts, "Decode context depths (tokens; on a CPU: 0,256)")
      ->delimiter(',')->capture_default_str()->each(given);
  app.add_option("--batches", o.batches, "Decode batch sizes (sequences; on a CPU: 1,2)")
      ->delimiter(',')->capture_default_str()->each(given);
  app.add_option("--prefill-chunk", o.prefill_chunk, "Most tokens of one forward pass")->capture_default_str();
  app.add_option("--decode-steps", o.decode_steps, "Timed decode steps per repeat (on a CPU: 8)")
      ->capture_default_str()->each(given);
  add_threads_option(app, o.threads);
  app.add_option("--warmup", o.warmup, "Untimed runs before timing (decode: 4 steps each)")->capture_default_str();
  app.add_option("--repeats", o.repeats, "Timed repeats (median, min and max are reported)")->capture_default_str();
  app.add_flag("--skip-prefill", o.skip_prefill, "Measure decode only");
  app.add_flag("--skip-decode", o.skip_decode, "Measure prefill only");
  app.add_flag("--no-cuda-graph", o.no_cuda_graph, "Diagnostic: launch decode steps one kernel at a time");
  app.add_flag("--json", o.json, "Print one JSON object instead of the table");
  app.add_flag("-v,--verbose", o.verbose, "Debug logging on stderr");
}

bool benches_cpu(const BenchOptions& o) {
  if (o.device == "cpu") return true;
  for (const auto& p : random_checkpoint_presets())
    if (p.name == o.preset) return true;
  return o.device == "auto" && discover_devices().cuda.empty();
}

void use_cpu_points(BenchOptions& o) {
  o.prompt_lengths = kCpuPromptLengths;
  o.contexts = kCpuContexts;
  o.batches = kCpuBatches;
  o.decode_steps = kCpuDecodeSteps;
}

void check_bench_options(const BenchOptions& o) {
  auto positive = [](const std::vector<int64_t>& v, const char* flag, bool zero_ok) {
    if (v.empty()) throw UsageError(fmt::format("{} needs at least one value", flag));
    for (int64_t x : v)
      if (x < (zero_ok ? 0 : 1)) throw UsageError(fmt::format("{}: {} is not a valid size", flag, x));
  };
  if (!o.skip_prefill) positive(o.prompt_lengths, "--prompt-lengths", false);
  if (!o.skip_decode) {
    positive(o.contexts, "--contexts", true);
    positive(o.batches, "--batches", false);
  }
  if (o.skip_prefill && o.skip_decode) throw UsageError("--skip-prefill and --skip-decode leave nothing to measure");
  check_spec_options(o.spec);
  if (o.spec_acceptance && !(*o.spec_acceptance >= 0 && *o.spec_acceptance <= 1))
    throw UsageError(fmt::format("--spec-acceptance {}: expected a probability in [0, 1]", *o.spec_acceptance));
  const SamplingParams& p = o.sampling;
  try {
    p.validate();
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  if (p.is_greedy() && (p.top_k > 0 || p.top_p < 1 || p.min_p > 0))
    throw UsageError("--top-k, --top-p and --min-p filter the sampler: give --temperature above 0 (0 is greedy)");
  if (o.prefill_chunk < 1 || o.decode_steps < 1 || o.repeats < 1 || o.warmup < 0)
    throw UsageError("--prefill-chunk, --decode-steps and --repeats must be >= 1, --warmup >= 0");
  if (o.preset.empty() && o.manifest.empty() && o.checkpoint.empty())
    throw UsageError("nothing to measure: give --preset NAME (see --list-presets), a manifest or --checkpoint DIR");
  if (o.weights != "bfloat16" && o.weights != "bf16" && o.preset.empty())
    throw UsageError("--weights draws a preset's quantized weights: a checkpoint or manifest brings its own (make a "
                     "quantized one with ninfer-quantize)");
  parse_weights_spec(o.weights);
  if (parse_weights_spec(o.mtp_weights, "--mtp-weights") && o.spec.method.value_or("none") != "mtp")
    throw UsageError("--mtp-weights quantizes the MTP head, which runs only with --spec mtp");
  if (o.dtype != "bfloat16" && o.dtype != "bf16" && o.dtype != "float32" && o.dtype != "f32" && o.dtype != "auto")
    throw UsageError(fmt::format("--dtype {}: expected bfloat16, float32 or auto", o.dtype));
  try {
    parse_device_spec(o.device);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

} // namespace ninfer::tools
