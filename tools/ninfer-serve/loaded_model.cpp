#include "loaded_model.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/device.hpp"
#include "ninfer/error.hpp"
#include "ninfer/paths.hpp"

namespace ninfer::tools {
namespace {

// The same resolution as ninfer-run: a manifest or an implicit one, with flag overrides.
Manifest resolve_manifest(const ServeOptions& o) {
  if (!o.manifest.empty() && !o.checkpoint.empty())
    throw Error("give either a MANIFEST or --checkpoint DIR, not both");
  if (o.manifest.empty() && o.checkpoint.empty())
    throw Error("no model: give a MANIFEST file or --checkpoint DIR (see ninfer-serve --help)");
  Manifest m = o.manifest.empty() ? implicit_manifest(o.checkpoint) : load_manifest(o.manifest);
  if (o.dtype) {
    if (*o.dtype == "auto") m.dtype = WeightDType::Auto;
    else if (*o.dtype == "float32") m.dtype = WeightDType::Float32;
    else if (*o.dtype == "bfloat16") m.dtype = WeightDType::BFloat16;
    else throw Error(fmt::format("--dtype {}: expected auto, float32 or bfloat16", *o.dtype));
  }
  if (o.max_context) {
    if (*o.max_context < 2) throw Error(fmt::format("--max-context must be at least 2 (got {})", *o.max_context));
    m.runtime.max_context = *o.max_context;
  }
  return m;
}

WeightPrecision precision(WeightDType d) {
  switch (d) {
    case WeightDType::Float32: return WeightPrecision::F32;
    case WeightDType::BFloat16: return WeightPrecision::BF16;
    case WeightDType::Float16: throw Error("dtype float16 is not supported yet: use auto, float32 or bfloat16");
    case WeightDType::Auto: break;
  }
  return WeightPrecision::Auto;
}

std::vector<ninfer_device_info> candidate_devices(const std::string& device) {
  const Discovery disc = discover_devices();
  if (device == "cpu") return {host_device()};
  if (device == "auto") {
    std::vector<ninfer_device_info> out = disc.cuda;
    out.push_back(host_device());
    return out;
  }
  if (device.rfind("cuda", 0) == 0) {
    size_t idx = 0;
    if (device.size() > 5 && device[4] == ':') idx = std::stoul(device.substr(5));
    else if (device != "cuda") throw Error(fmt::format("--device {}: expected cpu, cuda, cuda:N or auto", device));
    if (idx >= disc.cuda.size())
      throw Error(fmt::format("--device {}: {}", device,
                              disc.cuda.empty() ? disc.note : fmt::format("only {} CUDA device(s)", disc.cuda.size())));
    return {disc.cuda[idx]};
  }
  throw Error(fmt::format("--device {}: expected cpu, cuda, cuda:N or auto", device));
}

} // namespace

LoadedModel load_model(const ServeOptions& o) {
  LoadedModel m;
  m.manifest = resolve_manifest(o);
  m.name = o.served_model_name.empty() ? m.manifest.name : o.served_model_name;
  if (m.manifest.tokenizer) m.tokenizer = Tokenizer::load(*m.manifest.tokenizer);
  const Checkpoint ck = Checkpoint::open(m.manifest.checkpoint);
  const ModelConfig& cfg = ck.config();
  if (cfg.random_weights)
    spdlog::warn("{} holds RANDOM weights (made by ninfer-make-checkpoint): its text is noise",
                 m.manifest.checkpoint.string());
  if (m.tokenizer && m.tokenizer->vocab_size() > cfg.vocab_size)
    throw Error(fmt::format("tokenizer {} has {} tokens but the model's embedding has {} rows: this tokenizer does "
                            "not belong to {}",
                            m.tokenizer->source(), m.tokenizer->vocab_size(), cfg.vocab_size,
                            m.manifest.checkpoint.string()));
  m.plugins = std::make_unique<PluginHost>();
  m.plugins->load_directory(o.plugin_dir.empty() ? default_plugin_dir() : std::filesystem::path(o.plugin_dir));
  ModelOptions mo;
  mo.max_context = m.manifest.runtime.resolved_max_context(cfg.max_position_embeddings);
  mo.max_sequences = o.max_concurrency;
  mo.prefill_chunk = o.prefill_chunk.value_or(static_cast<int32_t>(m.manifest.runtime.prefill_chunk));
  mo.weights = precision(m.manifest.dtype);
  std::string failures;
  for (const ninfer_device_info& dev : candidate_devices(o.device)) {
    try {
      auto be = std::make_unique<Backend>(*m.plugins, dev, BackendOptions{o.plugin, 0, nullptr});
      auto lm = CausalLM::load(ck, *be, mo);
      m.backend = std::move(be);
      m.lm = std::move(lm);
      break;
    } catch (const Error& e) {
      if (o.device != "auto") throw;
      spdlog::info("not using {}: {}", dev.name, e.what());
      failures += fmt::format("\n  {}: {}", dev.name, e.what());
    }
  }
  if (!m.lm) throw Error("no device can run this model:" + failures);
  spdlog::info("memory budget: {}", m.backend->memory().describe());
  return m;
}

} // namespace ninfer::tools
