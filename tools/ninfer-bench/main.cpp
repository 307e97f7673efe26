// ninfer-bench: prefill and decode speed of a model on one device, each figure as a fraction
// of its roofline (docs/performance.md). A shape preset needs no checkpoint: its weights are
// drawn on the device from a seed.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>

#include "bench_options.hpp"
#include "bench_report.hpp"
#include "preset_weights.hpp"
#include "bench_run.hpp"
#include "ninfer/checkpoint/expected_tensors.hpp"
#include "ninfer/checkpoint/shape_presets.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/support/log.hpp"
#include "ninfer/models/memory_plan.hpp"
#include "ninfer/models/model_setup.hpp"
#include "tool_cli.hpp"

namespace {

using namespace ninfer;
using tools::BenchOptions;

WeightDType parse_dtype(const std::string& s) {
  if (s == "bfloat16" || s == "bf16") return WeightDType::BFloat16;
  if (s == "float32" || s == "f32") return WeightDType::Float32;
  if (s == "auto") return WeightDType::Auto;
  throw Error(fmt::format("--dtype {}: expected bfloat16, float32 or auto", s));
}

ModelFiles model_files(const BenchOptions& o) {
  if (!o.preset.empty()) {
    const WeightDType dt = parse_dtype(o.dtype);
    if (dt == WeightDType::Auto) throw Error("--dtype auto needs a checkpoint; a preset's weights are bfloat16 or float32");
    Manifest m;
    m.name = o.preset;
    m.dtype = dt;
    m.runtime.prefill_chunk = o.prefill_chunk;
    m.runtime.cuda_graphs = !o.no_cuda_graph;
    if (o.kv_dtype) m.runtime.kv_dtype = parse_kv_dtype_option(*o.kv_dtype);
    m.runtime.memory_limit_gib = o.memory_limit;
    if (o.kv_capacity) m.runtime.kv_capacity = parse_kv_capacity_option(*o.kv_capacity);
    m.runtime.kv_block_tokens = o.kv_block_tokens;
    apply_spec_overrides(m, o.spec);
    // A Qwen3.5 shape carries Qwen3.5's MTP head (one layer); its random drafts are rejected, so
    // the rounds measure their cost, one token each.
    return {m, std::nullopt,
            tools::preset_checkpoint(o.preset, dt == WeightDType::Float32 ? DType::F32 : DType::BF16, o.seed,
                                     m.spec.method == SpecKind::Mtp, o.weights, o.mtp_weights)};
  }
  ModelSource src{o.manifest, o.checkpoint, std::nullopt, std::nullopt, "ninfer-bench", o.no_cuda_graph};
  if (o.dtype_given) src.dtype = o.dtype;
  src.kv_dtype = o.kv_dtype;
  src.memory_limit_gib = o.memory_limit;
  src.kv_capacity = o.kv_capacity;
  src.spec = o.spec;
  ModelFiles f = open_model_files(src);
  if (o.kv_block_tokens) f.manifest.runtime.kv_block_tokens = o.kv_block_tokens;
  return f;
}

// Bytes of the embedding table on the device (a decode step reads one row of it).
double embedding_bytes(const ModelFiles& f) {
  const ModelConfig& cfg = f.checkpoint.config();
  const ExpectedTensor emb = expected_tensors(cfg).front();
  const bool bf16 = f.manifest.dtype == WeightDType::BFloat16 ||
                    (f.manifest.dtype == WeightDType::Auto && f.checkpoint.tensor(emb.name).dtype == DType::BF16);
  return static_cast<double>(cfg.vocab_size) * static_cast<double>(cfg.hidden_size) * (bf16 ? 2.0 : 4.0);
}

int run(BenchOptions o) {
  if (o.list_presets) {
    for (const auto& p : shape_presets()) fmt::print("{:<20} {}\n", p.name, p.description);
    return 0;
  }
  if (o.print_config) {
    if (o.preset.empty()) throw Error("--print-config needs --preset NAME");
    fmt::print("{}\n", config_json_text(shape_preset_config(o.preset), DType::BF16));
    return 0;
  }
  tools::check_bench_options(o);
  tools::apply_threads(o.threads);
  if (!o.points_given && tools::benches_cpu(o)) {
    tools::use_cpu_points(o);
    if (!o.json)
      fmt::print(stderr, "ninfer-bench: CPU-sized points (prompts {}, contexts {}, batches {}; --prompt-lengths, "
                         "--contexts, --batches set others)\n",
                 fmt::join(o.prompt_lengths, ","), fmt::join(o.contexts, ","), fmt::join(o.batches, ","));
  }
  ModelFiles files = model_files(o);
  // The positions a decode point needs follow the speculation the load will run.
  o.spec.method = to_string(files.manifest.spec.method);
  o.spec.draft_tokens = files.manifest.spec.draft_tokens;
  o.spec.draft_vocab = files.manifest.spec.draft_vocab;
  if (o.spec_acceptance && files.manifest.spec.method != SpecKind::Mtp)
    throw tools::UsageError("--spec-acceptance sets the acceptance of speculative rounds: add --spec mtp (or a manifest "
                     "with spec.method mtp)");
  if (o.spec_verify_only && files.manifest.spec.method != SpecKind::Mtp)
    throw tools::UsageError("--spec-verify-only times the verification pass of speculative rounds: add --spec mtp (or "
                            "a manifest with spec.method mtp)");
  tools::fit_to_model(o, files.checkpoint.config().max_position_embeddings);
  files.manifest.runtime.max_context = tools::needed_context(o);
  if (!o.json) fmt::print(stderr, "ninfer-bench: loading {}\n", o.preset.empty() ? files.manifest.name : o.preset);
  const auto t0 = std::chrono::steady_clock::now();
  ModelOnDevice m = load_on_device(files, DeviceChoice{o.device, o.plugin_dir, o.plugin}, tools::needed_sequences(o),
                                   o.prefill_chunk);
  m.backend->synchronize();
  tools::BenchSetup setup;
  setup.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const ModelConfig& cfg = m.lm->config();
  setup.model = o.preset.empty() ? files.manifest.name : o.preset;
  setup.family = family_name(cfg.family);
  setup.weights_dtype = files.manifest.dtype == WeightDType::Float32 ? "float32"
                        : files.manifest.dtype == WeightDType::BFloat16 ? "bfloat16" : "as stored";
  if (const auto quant = o.preset.empty() ? std::nullopt : tools::parse_weights_spec(o.weights))
    setup.weights_dtype = fmt::format("{} + {}", tools::weights_label(*quant), setup.weights_dtype);
  if (const auto mtp = o.preset.empty() ? std::nullopt : tools::parse_weights_spec(o.mtp_weights, "--mtp-weights"))
    setup.weights_dtype += fmt::format(" (MTP head {})", tools::weights_label(*mtp));
  setup.kv_dtype = to_string(m.lm->options().kv_cache);
  setup.kv_block_tokens = m.lm->kv_block_tokens();
  setup.random_weights = !o.preset.empty() || cfg.random_weights;
  setup.device = m.backend->device().name;
  setup.plugin = m.backend->plugin().name();
  setup.max_context = m.lm->options().max_context;
  setup.max_sequences = m.lm->options().max_sequences;
  setup.memory = m.backend->memory();
  setup.plan_allocated = m.lm->memory_plan().parts.allocated();
  setup.plan_total = m.lm->memory_plan().parts.total();
  setup.device_taken = m.device_taken;
  setup.spec_acceptance = o.spec_acceptance;
  setup.spec_verify_only = o.spec_verify_only;
  m.lm->set_verify_only_rounds(o.spec_verify_only);
  setup.sampling = o.sampling;
  setup.draft_vocab = m.lm->options().speculation.draft_vocab ? m.lm->options().speculation.draft_vocab : cfg.vocab_size;
  setup.draft_head = to_string(m.lm->options().speculation.draft_head);
  MemoryReport plain = setup.memory;
  if (m.lm->options().speculation.on()) {
    // The rooflines are plain decode's: the bytes a load without speculation holds (no MTP head,
    // no per-draft states) are what its steps read.
    ModelOptions o_plain = m.lm->options();
    o_plain.speculation = {};
    plain.in_use = plan_memory(files.checkpoint, plan_target(*m.backend), o_plain, {}).parts.exact;
  }
  setup.costs = tools::model_costs(cfg, plain, setup.max_sequences, m.lm->kv_blocks_total() * m.lm->kv_block_tokens(),
                                   embedding_bytes(files));
  if (!o.json) fmt::print(stderr, "ninfer-bench: measuring the device's bandwidth and matmul rate\n");
  setup.rates = tools::measure_device_rates(*m.backend);
  const auto points = tools::run_benchmarks(*m.lm, o, setup.costs, setup.rates);
  setup.variants = tools::variants_used(*m.backend);
  setup.cuda_graphs = m.lm->decode_graphs_active(); // off if a recording failed during the run
  setup.graphs_recorded = m.lm->decode_graphs_recorded();
  if (o.json) tools::print_json(setup, points);
  else tools::print_table(setup, points);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  BenchOptions o;
  CLI::App app{"ninfer-bench: prefill and decode speed of a model, as fractions of the card's rooflines"};
  app.footer("Examples:\n  ninfer-bench --preset qwen3-8b --device cuda\n"
             "  ninfer-bench --preset qwen3_5-27b --prompt-lengths 4096 --contexts 0,4096 --batches 1 --json\n"
             "  ninfer-bench --preset qwen3_5-27b --weights int4-g128 --skip-prefill --batches 1,8\n"
             "  ninfer-bench models/qwen3-8b.yaml --skip-prefill --batches 1,8");
  tools::add_bench_options(app, o);
  tools::add_version_flag(app, "ninfer-bench");
  if (auto rc = tools::parse_command_line(app, argc, argv, "ninfer-bench")) return *rc;
  init_logging(o.verbose);
  return tools::run_tool("ninfer-bench", [&] { return run(o); });
}
