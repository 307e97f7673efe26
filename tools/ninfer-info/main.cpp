// ninfer-info: which devices and plugins this machine has, which plugin serves each device
// and why, and how any registered op would be launched on any device, real or described.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "ninfer/devices/arch_catalog.hpp"
#include "ninfer/devices/device.hpp"
#include "ninfer/abi/ops/attention.h"
#include "ninfer/abi/ops/gdn_gating.h"
#include "ninfer/abi/ops/head_norm_rope_append.h"
#include "ninfer/abi/ops/head_norm_rope_append_attention.h"
#include "ninfer/abi/ops/kv_append.h"
#include "ninfer/support/error.hpp"
#include "ninfer/support/log.hpp"
#include "ninfer/planning/op_catalog.hpp"
#include "ninfer/support/paths.hpp"
#include "ninfer/planning/planner.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/planning/schedule_table.hpp"
#include "checkpoint_report.hpp"
#include "fit_report.hpp"
#include "plan_report.hpp"
#include "tool_cli.hpp"

namespace {

using namespace ninfer;

struct Options {
  std::string plugin_dir;
  std::string forced_plugin;
  std::string device_model;
  std::string device = "auto";
  std::string plan_op;
  int64_t tokens = 1;
  std::vector<int64_t> dims;
  std::string dtype;
  bool json = false;
  bool list_ops = false;
  bool list_models = false;
  bool verbose = false;
  std::string checkpoint;              // --checkpoint DIR: check the folder and exit
  std::optional<int64_t> max_context;  // for --checkpoint's KV estimate and --fit
  bool fit = false;                    // --fit [DIR|MANIFEST] (or with --preset)
  tools::FitRequest fit_request;
};

// `op`: the planned op. The KV ops' dtype is the cache's, where int8, fp8 and int4r name the
// compact formats (kv_append.h); elsewhere int8 and fp8 are quantized weights.
int32_t parse_dtype(const std::string& s, std::string_view op) {
  const bool kv_op = op == NINFER_OP_ATTENTION || op == NINFER_OP_KV_APPEND || op == NINFER_OP_HEAD_NORM_ROPE_APPEND ||
                     op == NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION;
  if (kv_op && s == "int8") return NINFER_DTYPE_KV_INT8;
  if (kv_op && (s == "fp8" || s == "fp8_e4m3")) return NINFER_DTYPE_KV_FP8;
  if (kv_op && s == "int4r") return NINFER_DTYPE_KV_INT4R;
  if (s == "bf16" || s == "bfloat16") return NINFER_DTYPE_BF16;
  if (s == "f32" || s == "float32") return NINFER_DTYPE_F32;
  // f16: the KV cache of attention, kv_append, head_norm_rope_append(_attention)
  if (s == "f16" || s == "float16") return NINFER_DTYPE_F16;
  // quantized weights of linear (docs/quantization.md)
  if (s == "int4") return NINFER_DTYPE_INT4;
  if (s == "int8") return NINFER_DTYPE_INT8;
  if (s == "fp8" || s == "fp8_e4m3") return NINFER_DTYPE_FP8_E4M3;
  throw Error(fmt::format("unknown --dtype '{}' (use bf16, f16, f32, int4, int8 or fp8; int4r for a KV op)", s));
}

// The device a plan is for: a described card, or a live device chosen by --device.
ninfer_device_info target_device(const Options& o, const Discovery& disc) {
  if (!o.device_model.empty()) {
    ArchCatalog cat = ArchCatalog::load_default();
    return cat.describe(cat.require_device(o.device_model));
  }
  return devices_for(parse_device_spec(o.device), disc).front();
}

void print_choice(const ninfer_device_info& d, const PluginChoice& c) {
  fmt::print("  {}\n", summary(d));
  for (const auto& s : c.scores)
    fmt::print("    {:<12} score {:>3}  {}\n", s.plugin->name(), s.score, s.reason);
  if (c.chosen) {
    fmt::print("    -> chosen: {}\n", c.chosen->name());
    // What the engine plans with here: a tuned table for this device (ninfer-tune), else the built-in one.
    const ScheduleTable t = default_schedule_table(*c.chosen, d);
    fmt::print("       schedule table: {} ({} entries)\n", t.source, t.entries.size());
  } else
    fmt::print("    -> no plugin may run here: build one for {} (docs/plugins.md) or use the CPU\n", d.arch);
}

Plan make_plan(const Options& o, const PluginHost& host, const ninfer_device_info& dev,
               ScheduleTable& table_out) {
  const OpInfo& op = require_op(o.plan_op);
  PluginChoice c = host.choose(dev, o.forced_plugin);
  if (!c.chosen) {
    // Say why the plugin the user asked for (or, unforced, the best candidate) refused.
    std::string why = c.scores.empty() ? "no plugins were loaded" : c.scores.front().reason;
    for (const auto& s : c.scores)
      if (s.plugin->name() == o.forced_plugin) why = s.reason;
    throw Error(fmt::format("no plugin can run on {}: {}", dev.name, why));
  }
  ninfer_shape shape{};
  shape.tokens = o.tokens;
  for (size_t i = 0; i < 4; ++i) shape.dims[i] = op.default_dims[i];
  if (!o.dims.empty()) {
    if (o.dims.size() != op.dim_names.size())
      throw Error(fmt::format("--dims for {} takes {} values ({})", op.name, op.dim_names.size(),
                              fmt::join(op.dim_names, ",")));
    for (size_t i = 0; i < o.dims.size(); ++i) shape.dims[i] = o.dims[i];
  }
  shape.dtype = o.dtype.empty() ? op.default_dtype : parse_dtype(o.dtype, op.name);
  table_out = default_schedule_table(*c.chosen, dev); // as the engine would: tuned when one matches
  Planner planner(*c.chosen, dev, &table_out);
  return planner.plan(op.name, shape);
}

int run(const Options& o) {
  if (o.max_context && *o.max_context < 2)
    throw tools::UsageError(fmt::format("--max-context must be at least 2 (got {})", *o.max_context));
  if (o.fit) {
    tools::FitRequest r = o.fit_request;
    r.max_context = o.max_context;
    r.device = o.device;
    r.device_model = o.device_model;
    r.plugin_dir = o.plugin_dir;
    r.plugin = o.forced_plugin;
    const tools::FitResult f = tools::fit(r);
    if (o.json) std::cout << tools::fit_json(f).dump(2) << "\n";
    else std::cout << tools::fit_text(f);
    return f.plan.fits() ? tools::kExitOk : tools::kExitFailure;
  }
  if (!o.fit_request.preset.empty()) throw tools::UsageError("--preset goes with --fit");
  const SpecOverrides& spec = o.fit_request.spec;
  if (spec.method || spec.draft_tokens || spec.draft_vocab || spec.draft_head || o.fit_request.mtp_weights != "bfloat16")
    throw tools::UsageError("--spec, --draft-tokens, --draft-vocab, --draft-head and --mtp-weights go with --fit");
  if (!o.checkpoint.empty()) {
    const tools::CheckpointReport r = tools::check_checkpoint(o.checkpoint, o.max_context);
    std::cout << tools::report_text(r);
    return r.problems() == 0 ? tools::kExitOk : tools::kExitFailure;
  }
  if (o.max_context) throw tools::UsageError("--max-context goes with --checkpoint DIR or --fit");
  if (o.list_models) {
    ArchCatalog cat = ArchCatalog::load_default();
    for (const auto& d : cat.devices())
      fmt::print("{:<24} {:<8} {:>4} SMs  {:>5.0f} GiB\n", d.name, d.arch, d.sm_count, d.memory_gib);
    return 0;
  }
  if (o.list_ops) {
    for (const auto& op : op_catalog())
      fmt::print("{:<12} dims ({}), default {}: {}\n", op.name, fmt::join(op.dim_names, ", "),
                 fmt::join(op.default_dims.begin(), op.default_dims.begin() + op.dim_names.size(), "x"),
                 op.summary);
    return 0;
  }
  if (o.tokens < 1) throw tools::UsageError(fmt::format("--tokens must be >= 1 (got {})", o.tokens));

  PluginHost host;
  const auto dir = o.plugin_dir.empty() ? default_plugin_dir() : std::filesystem::path(o.plugin_dir);
  host.load_directory(dir);
  if (!o.forced_plugin.empty() && !host.find(o.forced_plugin))
    throw Error(tools::no_such_plugin(o.forced_plugin, dir, host));
  const Discovery disc = discover_devices();

  if (!o.plan_op.empty()) {
    ScheduleTable table;
    Plan p = make_plan(o, host, target_device(o, disc), table);
    if (o.json)
      std::cout << tools::plan_to_json(p).dump(2) << "\n";
    else
      std::cout << tools::plan_to_text(p);
    return 0;
  }

  // Devices first: choosing for them registers a fallback plugin where one is needed.
  std::vector<std::pair<ninfer_device_info, PluginChoice>> choices;
  for (const auto& d : disc.cuda) choices.emplace_back(d, host.choose(d, o.forced_plugin));
  choices.emplace_back(host_device(), host.choose(host_device(), o.forced_plugin));

  fmt::print("ninfer {} — plugin directory {}\n\n", tools::build_version(), dir.string());
  fmt::print("Plugins\n");
  for (const auto& p : host.plugins()) {
    if (p->deferred) {
      fmt::print("  {:<12} {:<8} v{:<6} a fallback, registered only for a device no other plugin serves  {}\n",
                 p->name(), p->arch(), p->abi->version, p->file.filename().string());
      continue;
    }
    fmt::print("  {:<12} {:<8} v{:<6} {} variants ({})  {}\n", p->name(), p->arch(), p->abi->version,
               p->variants.size(), fmt::join(p->ops(), ", "), p->file.filename().string());
  }
  for (const auto& pr : host.problems()) fmt::print("  skipped {}: {}\n", pr.file.filename().string(), pr.message);

  fmt::print("\nDevices\n");
  if (disc.cuda.empty()) fmt::print("  {}\n", disc.note);
  else fmt::print("  CUDA driver {}, runtime {}\n", disc.driver_version, disc.runtime_version);
  for (const auto& [d, c] : choices) print_choice(d, c);

  // A sample plan, so the first run shows what the planner does on this machine's best device.
  Options sample = o;
  sample.plan_op = NINFER_OP_GDN_GATING;
  sample.tokens = 1665;
  ScheduleTable table;
  fmt::print("\nExample plan (ninfer-info --plan {} --tokens {}{})\n", sample.plan_op, sample.tokens,
             disc.cuda.empty() ? " --device-model \"RTX 4080 SUPER\"" : "");
  if (disc.cuda.empty()) sample.device_model = "RTX 4080 SUPER";
  try {
    std::cout << tools::plan_to_text(make_plan(sample, host, target_device(sample, disc), table));
  } catch (const Error& e) {
    fmt::print("  (none: {})\n", e.what()); // e.g. a build without CUDA plugins
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"ninfer-info: devices, architecture plugins and launch plans"};
  app.add_option("--plugin-dir", o.plugin_dir, "Directory of plugins (default: $NINFER_PLUGIN_DIR, else <install>/lib/ninfer/plugins)");
  app.add_option("--plugin", o.forced_plugin, "Use only this plugin (it must still score above zero)");
  app.add_option("--device", o.device, "Device to plan for: auto, cpu, cuda, cuda:N")->capture_default_str();
  app.add_option("--device-model", o.device_model, "Plan for a described card instead (see --list-device-models)");
  app.add_option("--plan", o.plan_op, "Print the launch plan of OP (see --list-ops)");
  app.add_option("--tokens", o.tokens, "Token count for --plan")->capture_default_str();
  app.add_option("--dims", o.dims, "Op dims for --plan, comma separated (default: the op's real-model shape)")->delimiter(',');
  app.add_option("--dtype", o.dtype, "Input dtype for --plan: bf16, f16, f32, or a quantized weight int4, int8, fp8 (linear; attention, kv_append, head_norm_rope_append(_attention): the KV cache's, where int8, fp8 and int4r are the compact formats; default: the op's)");
  app.add_flag("--json", o.json, "Print the plan as JSON");
  app.add_flag("--list-ops", o.list_ops, "List the op contracts");
  app.add_flag("--list-device-models", o.list_models, "List the cards that can be described with --device-model");
  app.add_option("--checkpoint", o.checkpoint,
                 "Check a checkpoint folder (files, tensor shapes and dtypes, tokenizer, memory needed) and exit: 0 "
                 "when it is ready to run, 1 with the problems listed");
  app.add_option("--max-context", o.max_context,
                 "With --checkpoint: the context of the KV-cache estimate (default: the model's positions); with "
                 "--fit: plan this context instead of the longest that fits");
  tools::FitRequest& f = o.fit_request;
  CLI::Option* fit = app.add_option("--fit", f.source,
                 "The memory plan of a checkpoint folder or manifest (or --preset) on a device: weights by format, "
                 "KV bytes per token, state, activations, workspace, and the longest context that fits at each "
                 "concurrency (docs/memory.md); exit 0 when it fits")
      ->expected(0, 1);
  app.add_option("--preset", f.preset, "With --fit: a shape preset instead of a checkpoint (ninfer-bench --list-presets)");
  app.add_option("--weights", f.weights,
                 "With --fit --preset: its decoder linears, bfloat16, int4-g128, int8-g128 (any gN), int4-channel, "
                 "int8-channel or fp8, as ninfer-bench --weights")
      ->capture_default_str();
  ninfer::tools::add_spec_options(app, f.spec);
  app.add_option("--mtp-weights", f.mtp_weights,
                 "With --fit --preset --spec mtp: the MTP head's linears, in --weights' forms (default bfloat16, as a "
                 "default ninfer-quantize run leaves the head)")
      ->capture_default_str();
  app.add_option("--memory", f.memory_gib,
                 "With --fit: GiB of device memory (a --device-model card's own otherwise; a limit on a live device)")
      ->check(ninfer::tools::gib_amount());
  app.add_option("--kv-dtype", f.kv_dtype, "With --fit: KV cache auto, float32, float16, bfloat16, int8, fp8, int4r (default: the manifest's)")
      ->check(CLI::IsMember({"auto", "float32", "float16", "bfloat16", "int8", "fp8", "int4r"}));
  app.add_option("--concurrency", f.concurrency, "With --fit: sequences at once (default: the manifest's max_concurrency, 4)")
      ->check(ninfer::tools::positive_count());
  app.add_option("--prefill-chunk", f.prefill_chunk, "With --fit: prompt tokens per forward pass (default: the manifest's, 2048)")
      ->check(ninfer::tools::positive_count());
  app.add_flag("-v,--verbose", o.verbose, "Debug logging");
  ninfer::tools::add_version_flag(app, "ninfer-info");
  if (auto rc = ninfer::tools::parse_command_line(app, argc, argv, "ninfer-info")) return *rc;
  o.fit = fit->count() > 0;
  ninfer::init_logging(o.verbose);
  return ninfer::tools::run_tool("ninfer-info", [&] { return run(o); });
}
