#include "ninfer/models/model_setup.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <charconv>

#include "ninfer/devices/device.hpp"
#include "ninfer/models/memory_plan.hpp"
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

} // namespace

KvCachePrecision kv_cache_precision(KvDType d) {
  switch (d) {
    case KvDType::Float32: return KvCachePrecision::F32;
    case KvDType::Float16: return KvCachePrecision::F16;
    case KvDType::BFloat16: return KvCachePrecision::BF16;
    case KvDType::Int8: return KvCachePrecision::Int8;
    case KvDType::Fp8: return KvCachePrecision::Fp8;
    case KvDType::Int4r: return KvCachePrecision::Int4r;
    case KvDType::Auto: break;
  }
  return KvCachePrecision::Auto;
}

KvDType parse_kv_dtype_option(const std::string& text) {
  for (KvDType d : {KvDType::Auto, KvDType::Float32, KvDType::Float16, KvDType::BFloat16, KvDType::Int8, KvDType::Fp8,
                    KvDType::Int4r})
    if (text == to_string(d)) return d;
  throw Error(fmt::format("--kv-dtype {}: expected auto, float32, float16, bfloat16, int8, fp8 or int4r", text));
}

std::optional<int64_t> parse_kv_capacity_option(const std::string& text) {
  if (text == "auto") return std::nullopt;
  int64_t v = 0;
  const char* end = text.data() + text.size();
  if (std::from_chars(text.data(), end, v).ptr != end || v < 1)
    throw Error(fmt::format("--kv-capacity {}: expected auto or a number of tokens >= 1", text));
  return v;
}

SpecKind parse_spec_option(const std::string& text) {
  for (SpecKind k : {SpecKind::None, SpecKind::Mtp})
    if (text == to_string(k)) return k;
  throw Error(fmt::format("--spec {}: expected none or mtp", text));
}

DraftHeadKind parse_draft_head_option(const std::string& text) {
  for (DraftHeadKind h : {DraftHeadKind::LmHead, DraftHeadKind::Int4})
    if (text == to_string(h)) return h;
  throw Error(fmt::format("--draft-head {}: expected lm_head or int4", text));
}

size_t memory_limit_bytes(double gib) {
  if (!(gib > 0) || gib > kMaxMemoryLimitGib) throw Error(fmt::format("--memory-limit {}: expected GiB > 0", gib));
  return static_cast<size_t>(gib * double(size_t{1} << 30));
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
  if (s.memory_limit_gib) {
    memory_limit_bytes(*s.memory_limit_gib); // checks it
    m.runtime.memory_limit_gib = s.memory_limit_gib;
  }
  if (s.kv_capacity) m.runtime.kv_capacity = parse_kv_capacity_option(*s.kv_capacity);
  apply_spec_overrides(m, s.spec);
  return m;
}

void apply_spec_overrides(Manifest& m, const SpecOverrides& spec) {
  if (spec.method) m.spec.method = parse_spec_option(*spec.method);
  if (const auto& k = spec.draft_tokens) {
    if (*k < 1 || *k > kMostDraftTokens) throw Error(fmt::format("--draft-tokens {}: expected 1 to {}", *k, kMostDraftTokens));
    m.spec.draft_tokens = *k;
  }
  if (const auto& n = spec.draft_vocab) {
    if (*n < 0) throw Error(fmt::format("--draft-vocab {}: expected a number of tokens >= 1, or 0 for all", *n));
    m.spec.draft_vocab = *n;
  }
  if (spec.draft_head) m.spec.draft_head = parse_draft_head_option(*spec.draft_head);
  if (const auto& n = spec.max_batch) {
    if (*n < 0) throw Error(fmt::format("--spec-max-batch {}: expected a number of sequences >= 1, or 0 for no cap", *n));
    m.spec.max_batch = *n;
  }
  require_spec_method(spec, m.spec.method);
}

void require_spec_method(const SpecOverrides& spec, SpecKind method) {
  if (method == SpecKind::Mtp) return;
  for (const auto& [flag, set] : {std::pair{"--draft-tokens", spec.draft_tokens.has_value()},
                                  std::pair{"--draft-vocab", spec.draft_vocab.has_value()},
                                  std::pair{"--draft-head", spec.draft_head.has_value()},
                                  std::pair{"--spec-max-batch", spec.max_batch.has_value()}})
    if (set)
      throw Error(fmt::format("{} sets speculative decoding up, which is off: add --spec mtp (or set the manifest's "
                              "spec.method)",
                              flag));
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
  if (m.runtime.max_context)
    require_context_within_positions(*m.runtime.max_context, cfg,
                                     source.max_context ? std::string("--max-context") : m.where("runtime.max_context"));
  return ModelFiles{std::move(m), std::move(tokenizer), std::move(ck)};
}

void require_context_within_positions(int64_t max_context, const ModelConfig& cfg, const std::string& origin) {
  if (cfg.max_position_embeddings > 0 && max_context > cfg.max_position_embeddings)
    throw Error(fmt::format("{}: {} exceeds the model's {} positions (max_position_embeddings in its config.json): "
                            "positions past them were never trained; set at most {}",
                            origin, max_context, cfg.max_position_embeddings, cfg.max_position_embeddings));
}

void require_draft_vocab_within(int64_t draft_vocab, const ModelConfig& cfg, const std::string& origin) {
  if (draft_vocab > cfg.vocab_size)
    throw Error(fmt::format("{} {} exceeds the model's vocabulary of {} tokens", origin, draft_vocab, cfg.vocab_size));
}

ModelOptions model_options(const Manifest& m, int32_t max_sequences, std::optional<int32_t> prefill_chunk,
                           std::optional<int32_t> mixed_chunk) {
  ModelOptions mo;
  mo.max_context = m.runtime.max_context.value_or(0); // 0: what the model supports and the memory allows
  mo.kv_capacity = m.runtime.kv_capacity.value_or(0);
  mo.kv_block_tokens = static_cast<int32_t>(m.runtime.kv_block_tokens.value_or(0));
  mo.max_sequences = max_sequences;
  mo.prefill_chunk = prefill_chunk.value_or(static_cast<int32_t>(m.runtime.prefill_chunk));
  mo.mixed_chunk = mixed_chunk.value_or(static_cast<int32_t>(m.runtime.mixed_chunk.value_or(0)));
  if (mo.mixed_chunk > mo.prefill_chunk) // named where each was set: a flag, or the manifest's line
    throw Error(fmt::format("{} {} exceeds {} {}: a mixed step carries at most one prompt chunk; set at most {} "
                            "(or 0 for the cost rule)",
                            mixed_chunk ? std::string("--mixed-chunk") : m.where("runtime.mixed_chunk"), mo.mixed_chunk,
                            prefill_chunk ? std::string("--prefill-chunk") : m.where("runtime.prefill_chunk"),
                            mo.prefill_chunk, mo.prefill_chunk));
  mo.weights = precision(m.dtype);
  mo.cuda_graphs = m.runtime.cuda_graphs;
  mo.kv_cache = kv_cache_precision(m.runtime.kv_dtype);
  if (m.spec.method == SpecKind::Mtp)
    mo.speculation = {SpecMethod::Mtp, static_cast<int32_t>(m.spec.draft_tokens),
                      static_cast<int32_t>(std::min<int64_t>(m.spec.draft_vocab, INT32_MAX)),
                      static_cast<int32_t>(std::min<int64_t>(m.spec.max_batch, INT32_MAX)),
                      m.spec.draft_head == DraftHeadKind::Int4 ? DraftHead::Int4 : DraftHead::LmHead};
  return mo;
}

ModelOnDevice load_on_device(const ModelFiles& files, const DeviceChoice& choice, int32_t max_sequences,
                             std::optional<int32_t> prefill_chunk, std::optional<int32_t> mixed_chunk,
                             bool state_snapshots, int32_t prefix_states) {
  const Manifest& m = files.manifest;
  ModelOptions mo = model_options(m, max_sequences, prefill_chunk, mixed_chunk);
  mo.state_snapshots = state_snapshots && !mo.speculation.on(); // ModelOptions::state_snapshots
  mo.prefix_states = mo.speculation.on() ? 0 : prefix_states;    // ModelOptions::prefix_states

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
  size_t free_before = 0;
  for (const ninfer_device_info& dev : devices_for(parse_device_spec(choice.device), discover_devices())) {
    try {
      BackendOptions bo;
      bo.plugin = choice.plugin;
      if (m.runtime.memory_limit_gib) bo.memory_limit = memory_limit_bytes(*m.runtime.memory_limit_gib);
      auto be = std::make_unique<Backend>(*out.plugins, dev, bo);
      free_before = be->memory().free;
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
  spdlog::info("{}", out.lm->memory_plan().text());
  const MemoryReport report = out.backend->memory();
  spdlog::info("KV cache: {} (kv_dtype {}); memory budget: {}", to_string(out.lm->options().kv_cache),
               to_string(m.runtime.kv_dtype), report.describe());
  if (mo.speculation.on())
    spdlog::info("speculative decoding: {} drafts per round from the MTP head over {} (requests picked on the "
                 "device{})",
                 mo.speculation.draft_tokens,
                 mo.speculation.draft_vocab ? fmt::format("token ids below {}", mo.speculation.draft_vocab)
                                            : std::string("the whole vocabulary"),
                 mo.speculation.max_batch && max_sequences > 1
                     ? fmt::format("; rounds while at most {} decode", mo.speculation.max_batch)
                     : std::string());
  if (max_sequences > 1)
    spdlog::info("prompt chunks: {} tokens alone, {} beside decoding streams (mixed_chunk{})",
                 out.lm->options().prefill_chunk, out.lm->options().mixed_chunk,
                 mo.mixed_chunk ? "" : ": the cost rule");
  // What the device lost to the load, against the plan (its estimates included): the check of
  // docs/memory.md's "A load against its plan" on a GPU.
  if (out.backend->device().kind == NINFER_DEVICE_CUDA && free_before > report.free) out.device_taken = free_before - report.free;
  if (out.device_taken)
    spdlog::info("the load took {} of device memory (cudaMemGetInfo); the plan said {} allocated, {} with the "
                 "allocator's rounding",
                 format_bytes(out.device_taken), format_bytes(out.lm->memory_plan().parts.allocated()),
                 format_bytes(out.lm->memory_plan().parts.allocated() + out.lm->memory_plan().parts.allocator));
  return out;
}

} // namespace ninfer
