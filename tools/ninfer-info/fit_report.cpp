#include "fit_report.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "ninfer/abi/ops/kv_append.h"
#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/checkpoint/model_family.hpp"
#include "ninfer/checkpoint/shape_presets.hpp"
#include "ninfer/devices/arch_catalog.hpp"
#include "ninfer/devices/device.hpp"
#include "ninfer/manifest/manifest.hpp"
#include "ninfer/models/model_setup.hpp"
#include "ninfer/planning/schedule_table.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/runtime/backend.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/support/paths.hpp"
#include "preset_weights.hpp"
#include "tool_cli.hpp"

namespace ninfer::tools {
namespace {

namespace fs = std::filesystem;

constexpr int32_t kMostConcurrency = 256; // the table's last row at most

size_t gib_bytes(double gib) { return static_cast<size_t>(gib * double(size_t{1} << 30)); }

// What is planned: the checkpoint (or a synthetic one for a preset) and the manifest whose
// runtime options apply.
struct Source {
  Manifest manifest;
  std::optional<Checkpoint> checkpoint;
  std::string label;
};

Source open_source(const FitRequest& r) {
  Source s;
  const auto mtp_quant = parse_weights_spec(r.mtp_weights, "--mtp-weights");
  if (mtp_quant && r.spec.method.value_or("none") != "mtp")
    throw UsageError("--mtp-weights quantizes the MTP head, which is planned only with --spec mtp");
  if (!r.preset.empty()) {
    if (!r.source.empty()) throw UsageError("--fit takes a checkpoint folder, a manifest or --preset, not two");
    apply_spec_overrides(s.manifest, r.spec);
    const auto quant = parse_weights_spec(r.weights);
    s.manifest.dtype = WeightDType::BFloat16;
    s.checkpoint = preset_checkpoint(r.preset, DType::BF16, 0, s.manifest.spec.method == SpecKind::Mtp, r.weights,
                                     r.mtp_weights);
    s.label = fmt::format("preset {} ({} weights{})", r.preset, quant ? weights_label(*quant) : std::string("bfloat16"),
                          s.manifest.spec.method != SpecKind::Mtp ? ""
                          : mtp_quant ? fmt::format(", MTP head {}", weights_label(*mtp_quant))
                                      : ", MTP head bfloat16");
    return s;
  }
  if (r.weights != "bfloat16" && r.weights != "bf16")
    throw UsageError("--weights draws a preset's quantized weights: a checkpoint brings its own");
  if (mtp_quant) throw UsageError("--mtp-weights draws a preset's quantized head: a checkpoint brings its own");
  if (r.source.empty()) throw UsageError("--fit needs a checkpoint folder, a manifest file or --preset NAME");
  s.manifest = fs::is_directory(r.source) ? implicit_manifest(r.source) : load_manifest(r.source);
  apply_spec_overrides(s.manifest, r.spec);
  s.checkpoint = Checkpoint::open(s.manifest.checkpoint);
  s.label = r.source;
  return s;
}

// What the plan is asked for, checked against the model as a load checks it.
ModelOptions asked_options(const FitRequest& r, const Manifest& m, const ModelConfig& cfg) {
  ModelOptions o = model_options(m, static_cast<int32_t>(r.concurrency.value_or(m.runtime.max_concurrency)),
                                 r.prefill_chunk ? std::optional<int32_t>(static_cast<int32_t>(*r.prefill_chunk))
                                                 : std::nullopt);
  if (r.max_context) o.max_context = *r.max_context;
  if (r.kv_dtype) o.kv_cache = kv_cache_precision(parse_kv_dtype_option(*r.kv_dtype));
  if (o.max_sequences < 1) throw UsageError(fmt::format("--concurrency must be >= 1 (got {})", o.max_sequences));
  if (o.max_context)
    require_context_within_positions(o.max_context, cfg, r.max_context ? "--max-context" : m.where("runtime.max_context"));
  try {
    require_draft_vocab_within(o.speculation.draft_vocab, cfg, "--draft-vocab");
  } catch (const Error& e) {
    throw UsageError(e.what()); // a flag's value, as ninfer-info's other checks of them
  }
  return o;
}

// The plugins, the device and the budget a plan is made with; the backend of a live device
// (it measures the free memory) and the schedule table stay alive with it.
struct Where {
  std::unique_ptr<PluginHost> host;
  std::unique_ptr<Backend> live;
  std::unique_ptr<ScheduleTable> table;
  PlanTarget target;
  MemoryBudget budget;
};

// `memory_gib`: --memory, else a manifest's runtime.memory_limit on a live device.
Where where_to_plan(const FitRequest& r, std::optional<double> memory_gib) {
  Where w;
  w.host = std::make_unique<PluginHost>();
  const fs::path dir = r.plugin_dir.empty() ? default_plugin_dir() : fs::path(r.plugin_dir);
  w.host->load_directory(dir);
  if (!r.plugin.empty() && !w.host->find(r.plugin)) throw Error(no_such_plugin(r.plugin, dir, *w.host));
  if (r.device_model.empty()) {
    const ninfer_device_info dev = devices_for(parse_device_spec(r.device), discover_devices()).front();
    BackendOptions bo;
    bo.plugin = r.plugin;
    if (memory_gib) bo.memory_limit = gib_bytes(*memory_gib);
    w.live = std::make_unique<Backend>(*w.host, dev, bo);
    w.target = plan_target(*w.live);
    w.budget = load_budget(*w.live);
    if (memory_gib)
      w.budget.limit_source = r.memory_gib ? fmt::format("--memory {}", *memory_gib) : "runtime.memory_limit";
    return w;
  }
  const ArchCatalog cat = ArchCatalog::load_default();
  const ninfer_device_info card = cat.describe(cat.require_device(r.device_model));
  w.budget.limit = r.memory_gib ? gib_bytes(*r.memory_gib) : static_cast<size_t>(card.memory_bytes);
  w.budget.limit_source = r.memory_gib ? fmt::format("--memory {}", *r.memory_gib) : std::string(card.name) + "'s memory";
  w.target.memory_device = card;
  const PluginChoice c = w.host->choose(card, r.plugin);
  if (c.chosen) {
    w.target.plugin = c.chosen;
    w.target.device = card;
  } else {
    // No plugin for this card here (a build without its architecture, or --plugin cpu): the
    // host plugin's planner sizes the workspace; the other parts do not depend on the plugin.
    const ninfer_device_info host = host_device();
    const PluginChoice h = w.host->choose(host);
    if (!h.chosen) throw Error(fmt::format("no plugin in {} can plan for {} or for the host", dir.string(), card.name));
    w.target.plugin = h.chosen;
    w.target.device = host;
    const std::string why = r.plugin.empty() ? fmt::format("no plugin for {} here", card.arch)
                                             : fmt::format("--plugin {}", r.plugin);
    w.target.note = fmt::format("workspace planned by plugin {} on the host ({}); a {} plugin's may differ",
                                h.chosen->name(), why, card.arch);
  }
  w.table = std::make_unique<ScheduleTable>(default_schedule_table(*w.target.plugin, w.target.device));
  w.target.table = w.table.get();
  return w;
}

constexpr KvCachePrecision kKvFormats[] = {KvCachePrecision::F32,  KvCachePrecision::F16, KvCachePrecision::BF16,
                                           KvCachePrecision::Int8, KvCachePrecision::Fp8, KvCachePrecision::Int4r};

// Bytes of one head row (elements and scales) of a cache of `p`; 0 where head_dim does not fit.
size_t kv_head_row_bytes(KvCachePrecision p, int64_t head_dim) {
  const int32_t d = kv_cache_dtype(p);
  if (!ninfer_kv_dtype_takes_head_dim(d, head_dim)) return 0;
  return static_cast<size_t>(ninfer_kv_row_bytes(d, head_dim) + ninfer_kv_row_scale_bytes(d, head_dim));
}

} // namespace

FitResult fit(const FitRequest& r) {
  Source src = open_source(r);
  const ModelOptions asked = asked_options(r, src.manifest, src.checkpoint->config());
  const Where w = where_to_plan(r, r.memory_gib || !r.device_model.empty() ? r.memory_gib
                                                                           : src.manifest.runtime.memory_limit_gib);
  FitResult f;
  f.source = src.label;
  f.config = src.checkpoint->config();
  f.device = w.target.memory_device;
  f.plugin = w.target.plugin->name();
  f.plan = plan_memory(*src.checkpoint, w.target, asked, w.budget);
  f.plan.model = r.preset.empty() ? src.manifest.name : r.preset;
  const int64_t hd = f.config.head_dim;
  const size_t head_rows = f.plan.kv_bytes_per_token / kv_head_row_bytes(f.plan.options.kv_cache, hd);
  for (KvCachePrecision p : kKvFormats)
    if (const size_t row = kv_head_row_bytes(p, hd)) f.kv_per_token.emplace_back(to_string(p), head_rows * row);
  if (f.plan.kv_tokens_fit < 0) return f; // no bound: every concurrency takes the model's positions
  for (int32_t c = 1; c <= kMostConcurrency; c *= 2) {
    ModelOptions o = asked;
    o.max_sequences = c;
    o.max_context = 0;
    o.kv_capacity = 0;
    const MemoryPlan p = plan_memory(*src.checkpoint, w.target, o, w.budget);
    f.by_concurrency.push_back({c, p.options.max_context, p.kv_tokens, p.fits()});
    if (!p.fits()) break;
  }
  return f;
}

std::string fit_text(const FitResult& f) {
  const MemoryPlan& p = f.plan;
  const ModelConfig& c = f.config;
  std::string s = fmt::format("Fit of {} ({}: {} layers, {} attention, {} Gated DeltaNet; {} positions)\n", f.source,
                              family_name(c.family), c.num_layers, c.num_layers_of(LayerKind::FullAttention),
                              c.num_layers_of(LayerKind::LinearAttention), c.max_position_embeddings);
  s += p.text() + "\n";
  s += "  KV per token:";
  for (size_t i = 0; i < f.kv_per_token.size(); ++i)
    s += fmt::format("{} {} {}", i ? "," : "", format_bytes(f.kv_per_token[i].second), f.kv_per_token[i].first);
  s += "\n";
  if (!f.by_concurrency.empty()) {
    s += fmt::format("  longest max_context by max_concurrency (KV cache {}):\n", to_string(p.options.kv_cache));
    for (const FitRow& row : f.by_concurrency)
      s += row.fits ? fmt::format("    {:>4} x {:>8} tokens = {:>9} KV tokens\n", row.concurrency, row.max_context,
                                  row.kv_tokens)
                    : fmt::format("    {:>4}   does not fit\n", row.concurrency);
  }
  s += p.fits() ? fmt::format("fits: {} sequences x {} tokens\n", p.options.max_sequences, p.options.max_context)
                : fmt::format("does not fit: {}\n", p.problem);
  return s;
}

nlohmann::json fit_json(const FitResult& f) {
  const MemoryPlan& p = f.plan;
  const MemoryParts& parts = p.parts;
  nlohmann::json j;
  j["source"] = f.source;
  j["model"] = {{"family", family_name(f.config.family)},
                {"layers", f.config.num_layers},
                {"attention_layers", f.config.num_layers_of(LayerKind::FullAttention)},
                {"gated_deltanet_layers", f.config.num_layers_of(LayerKind::LinearAttention)},
                {"max_position_embeddings", f.config.max_position_embeddings}};
  j["device"] = {{"name", f.device.name},
                 {"arch", f.device.arch},
                 {"described", f.device.described != 0},
                 {"memory_bytes", f.device.memory_bytes}};
  j["budget"] = {{"limit_bytes", p.budget.limit},
                 {"limit_source", p.budget.limit_source},
                 {"free_bytes", p.budget.free},
                 {"free_source", p.budget.free_source}};
  j["plugin"] = f.plugin;
  j["note"] = p.note;
  j["kv_dtype"] = to_string(p.options.kv_cache);
  j["weights_by_format"] = parts.weights_by_format;
  j["kv_bytes_per_token"] = nlohmann::json::object();
  for (const auto& [name, bytes] : f.kv_per_token) j["kv_bytes_per_token"][name] = bytes;
  j["state_bytes_per_sequence"] = p.state_bytes_per_sequence;
  j["parts"] = {{"weights", parts.of(MemoryUse::Weights)},
                {"kv_cache", parts.of(MemoryUse::KvCache)},
                {"gdn_state", parts.of(MemoryUse::State)},
                {"activations", parts.of(MemoryUse::Activations)},
                {"workspace", parts.of(MemoryUse::Workspace)},
                {"allocator", parts.allocator},
                {"cuda_graphs", parts.cuda_graphs},
                {"cuda_runtime", parts.cuda_runtime},
                {"allocated", parts.allocated()},
                {"total", parts.total()}};
  j["prefill_chunk"] = p.options.prefill_chunk;
  j["mixed_chunk"] = p.options.mixed_chunk;
  j["concurrency"] = p.options.max_sequences;
  j["max_context"] = p.options.max_context;
  j["kv_tokens"] = p.kv_tokens;
  j["kv_tokens_fit"] = p.kv_tokens_fit;
  j["fits"] = p.fits();
  j["problem"] = p.problem;
  nlohmann::json rows = nlohmann::json::array();
  for (const FitRow& r : f.by_concurrency)
    rows.push_back({{"concurrency", r.concurrency}, {"max_context", r.max_context}, {"kv_tokens", r.kv_tokens}, {"fits", r.fits}});
  j["by_concurrency"] = rows;
  return j;
}

} // namespace ninfer::tools
