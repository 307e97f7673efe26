// ninfer-tune: measures every legal variant of the tunable ops at a model's shapes on this
// device and writes the fastest correct choice per token bucket to a schedule table the engine
// then uses on this card (docs/tuning.md).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdio>
#include <map>
#include <tuple>

#include "ninfer/abi/ops/linear.h"
#include "ninfer/abi/ops/norm_linear.h"
#include "ninfer/checkpoint/shape_presets.hpp"
#include "ninfer/devices/device.hpp"
#include "tool_cli.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/jit/nvrtc.hpp"
#include "ninfer/support/log.hpp"
#include "ninfer/models/causal_lm.hpp"
#include "ninfer/models/model_setup.hpp"
#include "ninfer/support/paths.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/runtime/backend.hpp"
#include "ninfer/planning/schedule_table.hpp"
#include "confirm.hpp"
#include "preset_weights.hpp"
#include "quant_layout.hpp"
#include "tune_options.hpp"
#include "tune_report.hpp"
#include "tuner.hpp"

namespace {

using namespace ninfer;
using tools::TuneOptions;

extern "C" void on_signal(int) { tools::g_tune_interrupted = true; }

Checkpoint model_checkpoint(const TuneOptions& o) {
  if (!o.preset.empty()) {
    // --weights: the decoder linears a default ninfer-quantize run quantizes, as ninfer-bench draws them.
    return tools::preset_checkpoint(o.preset, DType::BF16, 0, false, o.weights, "bfloat16");
  }
  ModelFiles f = open_model_files({o.manifest, o.checkpoint, std::nullopt, std::nullopt, "ninfer-tune"});
  return std::move(f.checkpoint);
}

// Loads the model once so the backend plans its largest prefill, decode and mixed steps; those
// plans name every (op, shape) a forward pass runs. The model is then dropped: only shapes are
// kept, a quantized matrix's with the layout its weights have in the model (the scale dtype and
// zero points, which the shape does not carry).
std::vector<tools::ShapeToTune> model_shapes(Backend& be, const Checkpoint& ck, const TuneOptions& o) {
  ModelOptions mo;
  mo.max_context = o.prefill_chunk + 1;
  mo.max_sequences = 8;
  mo.prefill_chunk = o.prefill_chunk;
  mo.weights = WeightPrecision::BF16;
  mo.cuda_graphs = false;
  { auto lm = CausalLM::load(ck, be, mo); }
  // (op, dims[0..2], dtype, codes layout): norm_linear's dims[2] (gated) tells q|k|v from gate|up;
  // linear's is the group size of quantized weights, and the dtype keeps int4, int8, fp8 and
  // float apart. The two ops' dims[3] is the codes' layout the loader chose (quant_weight.h):
  // their cases time the kernels of that layout.
  std::map<std::tuple<std::string, int64_t, int64_t, int64_t, int32_t, int64_t>, int64_t> widest;
  for (const Plan* p : be.cached_plans())
    for (const std::string& op : o.ops)
      if (p->op == op && !p->unfused) { // an unfused route has no variant to time
        const bool weights = op == NINFER_OP_LINEAR || op == NINFER_OP_NORM_LINEAR;
        int64_t& t = widest[{op, p->shape.dims[0], p->shape.dims[1], p->shape.dims[2], p->shape.dtype,
                             weights ? p->shape.dims[3] : 0}];
        t = std::max(t, p->shape.tokens);
      }
  const auto layouts = tools::model_quant_layouts(ck);
  std::vector<tools::ShapeToTune> out;
  for (const auto& [k, t] : widest) {
    ninfer_shape s{};
    s.tokens = t;
    s.dims[0] = std::get<1>(k);
    s.dims[1] = std::get<2>(k);
    s.dims[2] = std::get<3>(k);
    s.dtype = std::get<4>(k);
    s.dims[3] = std::get<5>(k);
    out.push_back({std::get<0>(k), s, std::nullopt});
    if (ninfer_dtype_is_quantized(s.dtype)) out.back().quant = tools::quant_layout_for(layouts, out.back().op, s);
  }
  return out;
}

int run(TuneOptions& o) {
  tools::check_tune_options(o);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  PluginHost plugins;
  const std::filesystem::path dir = o.plugin_dir.empty() ? default_plugin_dir() : std::filesystem::path(o.plugin_dir);
  plugins.load_directory(dir);
  if (!o.plugin.empty() && !plugins.find(o.plugin)) throw Error(tools::no_such_plugin(o.plugin, dir, plugins));
  const auto devices = devices_for(parse_device_spec(o.device), discover_devices());
  if (devices.empty()) throw Error(fmt::format("--device {}: no such device here", o.device));
  const ninfer_device_info dev = devices.front();
  if (o.jit_sweep) {
    // Said once here, rather than as one exclusion per variant and bucket.
    if (dev.kind != NINFER_DEVICE_CUDA) throw Error("--jit-sweep needs a CUDA device (run-time compiled kernels are CUDA)");
    try {
      (void)jit::nvrtc_version();
    } catch (const Error& e) {
      throw Error(fmt::format("--jit-sweep needs NVRTC: {}", e.what()));
    }
  }
  // The built-in table is the baseline every measurement is compared with.
  Backend be(plugins, dev, BackendOptions{o.plugin, 0, nullptr, false});
  const LoadedPlugin* cpu_plugin = plugins.find("cpu");
  if (!cpu_plugin) throw Error("the cpu plugin (the reference every variant is checked against) is missing");
  Backend cpu(*cpu_plugin, host_device());

  const Checkpoint ck = model_checkpoint(o);
  if (!o.json) fmt::print(stderr, "ninfer-tune: {} on {} with plugin {}\n", o.preset.empty() ? ck.dir().string() : o.preset,
                          dev.name, be.plugin().name());
  const auto shapes = model_shapes(be, ck, o);
  if (!o.json)
    for (const auto& s : shapes)
      fmt::print(stderr, "  shape: {} {}x{}{}{} up to {} tokens\n", s.op, s.shape.dims[0], s.shape.dims[1],
                 s.op == "norm_linear" && s.shape.dims[2] ? " (gated)" : "",
                 s.quant ? fmt::format(" {} ({})", ninfer_dtype_name(s.shape.dtype), s.quant->describe()) : "",
                 s.shape.tokens);
  tools::TuneRun result = tools::run_tuning(be, cpu, shapes, o);
  const ScheduleTable builtin = builtin_schedule_table(be.plugin(), dev);
  const ScheduleDevice key = schedule_device(be.plugin(), dev);
  if (!o.no_confirm) tools::confirm_end_to_end(result, plugins, dev, be.plugin().name(), ck, builtin, key, o);
  const ScheduleTable table = tools::tuned_table(result, builtin, key);
  std::string written;
  if (!o.dry_run) {
    const std::filesystem::path file = o.out.empty() ? tuned_table_path(be.plugin(), dev) : std::filesystem::path(o.out);
    save_schedule_table(table, file);
    written = file.string();
  }
  if (o.json) tools::print_summary_json(result, table, written);
  else {
    tools::print_summary(result);
    if (!written.empty()) fmt::print("wrote {}\n", written);
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  TuneOptions o;
  CLI::App app{"ninfer-tune: measure every variant on this card and write the fastest to a schedule table"};
  app.footer("Examples:\n  ninfer-tune --preset qwen3-8b\n  ninfer-tune models/qwen3.5-27b.yaml --ops linear --budget-seconds 300\n"
             "  ninfer-tune --preset qwen3_5-27b --weights int4-g128 --ops linear\n"
             "  ninfer-tune --preset qwen3-8b --buckets 1,8,64 --dry-run --json\n\n"
             "Quantized linears (int4, int8, fp8_e4m3; a checkpoint's own or a preset's --weights) are tuned apart "
             "from float ones, with the model's scale dtype, zero points and group size; every variant is checked "
             "against the CPU reference plugin on the same codes (relative L2 <= 2e-2, as for float weights) before "
             "it is timed. Table entries name the weight dtype they were measured on.");
  tools::add_tune_options(app, o);
  tools::add_version_flag(app, "ninfer-tune");
  if (auto rc = tools::parse_command_line(app, argc, argv, "ninfer-tune")) return *rc;
  init_logging(o.verbose);
  const int rc = tools::run_tool("ninfer-tune", [&] { return run(o); });
  if (rc != tools::kExitOk && tools::g_tune_interrupted) {
    fmt::print(stderr, "ninfer-tune: interrupted; no table written\n");
    return tools::kExitInterrupted;
  }
  return rc;
}
