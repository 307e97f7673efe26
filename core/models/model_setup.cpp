#include "ninfer/models/model_setup.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "ninfer/devices/device.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/support/paths.hpp"

namespace ninfer {
namespace {

WeightPrecision precision(WeightDType d) {
  switch (d) {
    case WeightDType::Float32: return WeightPrecision::F32;
    case WeightDType::BFloat16: return WeightPrecision::BF16;
    case WeightDType::Float16: throw Error("dtype float16 is not supported yet: use auto, float32 or bfloat16");
    case WeightDType::Auto: break;
  }
  return WeightPrecision::Auto;
}

KvCachePrecision kv_precision(KvDType d) {
  switch (d) {
    case KvDType::Float32: return KvCachePrecision::F32;
    case KvDType::Float16: return KvCachePrecision::F16;
    case KvDType::BFloat16: return KvCachePrecision::BF16;
    case KvDType::Auto: break;
  }
  return KvCachePrecision::Auto;
}

} // namespace

KvDType parse_kv_dtype_option(const std::string& text) {
  for (KvDType d : {KvDType::Auto, KvDType::Float32, KvDType::Float16, KvDType::BFloat16})
    if (text == to_string(d)) return d;
  throw Error(fmt::format("--kv-dtype {}: expected auto, float32, float16 or bfloat16", text));
}

Manifest resolve_manifest(const ModelSource& s) {
  if (!s.manifest.empty() && !s.checkpoint.empty())
    throw Error("give either a MANIFEST or --checkpoint DIR, not both");
  if (s.manifest.empty() && s.checkpoint.empty())
    throw Error(fmt::format("no model: give a MANIFEST file or --checkpoint DIR (see {} --help)", s.tool));
  Manifest m = s.manifest.empty() ? implicit_manifest(s.checkpoint) : load_manifest(s.manifest);
  if (s.dtype) {
    if (*s.dtype == "auto") m.dtype = WeightDType::Auto;
    else if (*s.dtype == "float32") m.dtype = WeightDType::Float32;
    else if (*s.dtype == "bfloat16") m.dtype = WeightDType::BFloat16;
    else throw Error(fmt::format("--dtype {}: expected auto, float32 or bfloat16", *s.dtype));
  }
  if (s.kv_dtype) m.runtime.kv_dtype = parse_kv_dtype_option(*s.kv_dtype);
  if (s.max_context) {
    if (*s.max_context < 2) throw Error(fmt::format("--max-context must be at least 2 (got {})", *s.max_context));
    m.runtime.max_context = *s.max_context;
  }
  if (s.no_cuda_graph) m.runtime.cuda_graphs = false;
  return m;
}

ModelFiles open_model_files(const ModelSource& source) {
  Manifest m = resolve_manifest(source);
  std::optional<Tokenizer> tokenizer;
  if (m.tokenizer) tokenizer = Tokenizer::load(*m.tokenizer);
  Checkpoint ck = Checkpoint::open(m.checkpoint);
  const ModelConfig& cfg = ck.config();
  if (cfg.random_weights)
    spdlog::warn("{} holds RANDOM weights (made by ninfer-make-checkpoint): the text it generates is noise. See "
                 "README.md for running a real Qwen checkpoint.",
                 m.checkpoint.string());
  if (tokenizer && tokenizer->vocab_size() > cfg.vocab_size)
    throw Error(fmt::format("tokenizer {} has {} tokens but the model's embedding has {} rows: this tokenizer does "
                            "not belong to {}",
                            tokenizer->source(), tokenizer->vocab_size(), cfg.vocab_size, m.checkpoint.string()));
  return ModelFiles{std::move(m), std::move(tokenizer), std::move(ck)};
}

ModelOnDevice load_on_device(const ModelFiles& files, const DeviceChoice& choice, int32_t max_sequences,
                             std::optional<int32_t> prefill_chunk, std::optional<int32_t> mixed_chunk) {
  const Manifest& m = files.manifest;
  ModelOptions mo;
  mo.max_context = m.runtime.resolved_max_context(files.checkpoint.config().max_position_embeddings);
  mo.max_sequences = max_sequences;
  mo.prefill_chunk = prefill_chunk.value_or(static_cast<int32_t>(m.runtime.prefill_chunk));
  mo.mixed_chunk = mixed_chunk.value_or(static_cast<int32_t>(m.runtime.mixed_chunk.value_or(0)));
  mo.weights = precision(m.dtype);
  mo.cuda_graphs = m.runtime.cuda_graphs;
  mo.kv_cache = kv_precision(m.runtime.kv_dtype);

  ModelOnDevice out;
  out.plugins = std::make_unique<PluginHost>();
  const std::filesystem::path dir = choice.plugin_dir.empty() ? default_plugin_dir() : std::filesystem::path(choice.plugin_dir);
  out.plugins->load_directory(dir);
  if (!choice.plugin.empty() && !out.plugins->find(choice.plugin)) {
    std::vector<std::string> names;
    for (const auto& p : out.plugins->plugins()) names.push_back(p->name());
    throw Error(fmt::format("--plugin {}: no plugin of that name in {} (available: {})", choice.plugin, dir.string(),
                            names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "))));
  }
  std::string failures;
  for (const ninfer_device_info& dev : devices_for(parse_device_spec(choice.device), discover_devices())) {
    try {
      auto be = std::make_unique<Backend>(*out.plugins, dev, BackendOptions{choice.plugin, 0, nullptr});
      auto lm = CausalLM::load(files.checkpoint, *be, mo);
      out.backend = std::move(be);
      out.lm = std::move(lm);
      break;
    } catch (const Error& e) {
      if (choice.device != "auto") throw;
      spdlog::info("not using {}: {}", dev.name, e.what());
      failures += fmt::format("\n  {}: {}", dev.name, e.what());
    }
  }
  if (!out.lm) throw Error("no device can run this model:" + failures);
  spdlog::info("KV cache: {} (kv_dtype {}); memory budget: {}", to_string(out.lm->options().kv_cache),
               to_string(m.runtime.kv_dtype), out.backend->memory().describe());
  if (max_sequences > 1)
    spdlog::info("prompt chunks: {} tokens alone, {} beside decoding streams (mixed_chunk{})",
                 out.lm->options().prefill_chunk, out.lm->options().mixed_chunk,
                 mo.mixed_chunk ? "" : ": the cost rule");
  return out;
}

} // namespace ninfer
