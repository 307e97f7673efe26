// CausalLM: the public model API over a Decoder — argument checks, slots and positions, prompt
// chunking, logits rows.
#include "ninfer/models/causal_lm.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "decoder.hpp"
#include "model_families.hpp"
#include "ninfer/abi/ops/attention.h"
#include "ninfer/abi/ops/kv_append.h"
#include "ninfer/checkpoint/expected_tensors.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/runtime/backend.hpp"

namespace ninfer {

using models::SequenceChunk;

namespace {

ModelOptions resolve(const ModelConfig& cfg, ModelOptions o) {
  if (o.max_context == 0) o.max_context = std::min<int64_t>(cfg.max_position_embeddings > 0 ? cfg.max_position_embeddings : 4096, 4096);
  if (o.max_context < 1 || o.max_context > INT32_MAX)
    throw Error(fmt::format("max_context must be in [1, 2^31) tokens (got {})", o.max_context));
  if (o.max_sequences < 1) throw Error(fmt::format("max_sequences must be >= 1 (got {})", o.max_sequences));
  if (o.prefill_chunk < 1) throw Error(fmt::format("prefill_chunk must be >= 1 (got {})", o.prefill_chunk));
  return o;
}

int32_t to_dtype(KvCachePrecision p) {
  return p == KvCachePrecision::F16 ? NINFER_DTYPE_F16 : p == KvCachePrecision::BF16 ? NINFER_DTYPE_BF16 : NINFER_DTYPE_F32;
}

// Whether the backend's plugin has kv_append and attention variants for a cache of `dtype`
// (their dtype_mask: the planning shape's dtype is the cache dtype).
bool plugin_takes_kv_dtype(const Backend& be, int32_t dtype) {
  for (const char* op : {NINFER_OP_KV_APPEND, NINFER_OP_ATTENTION}) {
    bool any = false;
    for (const ninfer_variant* v : be.plugin().variants_for(op)) any = any || (v->dtype_mask & (1u << dtype));
    if (!any) return false;
  }
  return true;
}

// Auto: float16 on a CUDA device whose plugin takes it, float32 elsewhere (ModelOptions).
KvCachePrecision resolve_kv_cache(const Backend& be, KvCachePrecision want) {
  if (want == KvCachePrecision::Auto)
    return be.device().kind == NINFER_DEVICE_CUDA && plugin_takes_kv_dtype(be, NINFER_DTYPE_F16) ? KvCachePrecision::F16
                                                                                                : KvCachePrecision::F32;
  if (!plugin_takes_kv_dtype(be, to_dtype(want)))
    throw Error(fmt::format("plugin {} has no kv_append or attention variant for a {} KV cache; use kv_dtype auto or "
                            "float32",
                            be.plugin().name(), to_string(want)));
  return want;
}

} // namespace

const char* to_string(KvCachePrecision p) {
  switch (p) {
    case KvCachePrecision::F32: return "float32";
    case KvCachePrecision::F16: return "float16";
    case KvCachePrecision::BF16: return "bfloat16";
    case KvCachePrecision::Auto: break;
  }
  return "auto";
}

std::unique_ptr<CausalLM> CausalLM::load(const Checkpoint& ck, Backend& be, const ModelOptions& options) {
  const ModelConfig& cfg = ck.config();
  ModelOptions o = resolve(cfg, options);
  o.cuda_graphs = o.cuda_graphs && be.can_record();
  o.kv_cache = resolve_kv_cache(be, o.kv_cache);
  require_all(ck); // every missing or misshapen tensor in one message, before allocating anything
  if (const auto extra = unrecognised_tensors(ck); !extra.empty())
    spdlog::warn("{}: {} tensor(s) that no {} layer reads (first: {}); they are ignored", ck.dir().string(),
                 extra.size(), family_name(cfg.family), extra.front());
  models::StepLimits limits;
  limits.max_tokens = std::max<int64_t>(o.prefill_chunk, o.max_sequences);
  limits.max_sequences = o.max_sequences;
  limits.max_context = o.max_context;
  limits.kv_dtype = to_dtype(o.kv_cache);
  models::WeightLoader w(ck, be, o.weights);
  models::DecoderParts parts = models::decoder_builder(family_of(cfg))(w, be, cfg, limits);
  auto decoder = std::make_unique<models::Decoder>(be, std::move(parts), limits);
  decoder->set_decode_recording(o.cuda_graphs);
  spdlog::debug("{} loaded on {} ({} KV cache): {}", family_name(cfg.family), be.plugin().name(), to_string(o.kv_cache),
                be.memory().describe());
  return std::unique_ptr<CausalLM>(new CausalLM(cfg, o, be, std::move(decoder)));
}

CausalLM::CausalLM(ModelConfig config, ModelOptions options, Backend& backend, std::unique_ptr<models::Decoder> d)
    : config_(std::move(config)), options_(options), backend_(backend), decoder_(std::move(d)),
      positions_(static_cast<size_t>(options.max_sequences), 0) {}

CausalLM::~CausalLM() = default;

void CausalLM::check_slot(int32_t slot) const {
  if (slot < 0 || slot >= options_.max_sequences)
    throw Error(fmt::format("sequence slot {} does not exist: the model was loaded with max_sequences = {} (slots "
                            "0..{})",
                            slot, options_.max_sequences, options_.max_sequences - 1));
}

void CausalLM::check_ids(std::span<const int32_t> ids) const {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= config_.vocab_size)
      throw Error(fmt::format("token id {} (at index {}) is outside the model's vocabulary [0, {}); the tokenizer "
                              "does not match this model",
                              ids[i], i, config_.vocab_size));
}

int64_t CausalLM::position(int32_t slot) const {
  check_slot(slot);
  return positions_[static_cast<size_t>(slot)];
}

void CausalLM::reset(int32_t slot) {
  check_slot(slot);
  decoder_->reset(slot);
  positions_[static_cast<size_t>(slot)] = 0;
}

bool CausalLM::can_truncate() const { return config_.num_layers_of(LayerKind::LinearAttention) == 0; }

void CausalLM::truncate(int32_t slot, int64_t tokens) {
  check_slot(slot);
  if (!can_truncate())
    throw Error("this model has Gated DeltaNet layers, whose recurrent state cannot be rolled back: reset the slot");
  const int64_t pos = positions_[static_cast<size_t>(slot)];
  if (tokens < 0 || tokens > pos)
    throw Error(fmt::format("cannot truncate slot {} to {} tokens: it holds {}", slot, tokens, pos));
  positions_[static_cast<size_t>(slot)] = tokens;
}

bool CausalLM::decode_graphs_active() const { return decoder_->decode_recording(); }
size_t CausalLM::decode_graphs_recorded() const { return decoder_->decode_recordings(); }

void CausalLM::assume_context(int32_t slot, int64_t tokens) {
  check_slot(slot);
  if (tokens < 0 || tokens >= options_.max_context)
    throw Error(fmt::format("assumed context of {} tokens does not fit max_context = {}", tokens, options_.max_context));
  positions_[static_cast<size_t>(slot)] = tokens;
}

std::vector<float> CausalLM::prefill(int32_t slot, std::span<const int32_t> ids, LogitsFor which) {
  check_slot(slot);
  if (ids.empty()) throw Error("empty prompt: prefill needs at least one token");
  check_ids(ids);
  const int64_t pos = positions_[static_cast<size_t>(slot)];
  if (pos + static_cast<int64_t>(ids.size()) > options_.max_context)
    throw Error(fmt::format("a prompt of {} tokens does not fit: the sequence already holds {} of max_context = {} "
                            "tokens; shorten the prompt or raise max_context",
                            ids.size(), pos, options_.max_context));
  std::vector<float> out;
  const int64_t chunk = options_.prefill_chunk;
  try {
    for (int64_t b = 0; b < static_cast<int64_t>(ids.size()); b += chunk) {
      const int64_t n = std::min<int64_t>(chunk, static_cast<int64_t>(ids.size()) - b);
      const SequenceChunk c{slot, pos + b, ids.subspan(static_cast<size_t>(b), static_cast<size_t>(n))};
      decoder_->forward(std::span(&c, 1));
      positions_[static_cast<size_t>(slot)] = pos + b + n;
      if (which == LogitsFor::All) decoder_->logits(0, n, out);
      else if (b + n == static_cast<int64_t>(ids.size())) decoder_->logits(n - 1, 1, out);
    }
  } catch (...) {
    reset(slot); // a half-fed prompt leaves state no caller could use
    throw;
  }
  return out;
}

void CausalLM::decode_forward(std::span<const int32_t> slots, std::span<const int32_t> ids,
                              std::span<const RowSampling> params, models::Pick pick, bool chained) {
  static constexpr int32_t kPlaceholder = 0; // a chained step's ids are copied in on the backend
  if (slots.empty() || (!chained && slots.size() != ids.size()))
    throw Error(fmt::format("decode needs one token per sequence (got {} slots and {} ids)", slots.size(), ids.size()));
  if (slots.size() > static_cast<size_t>(options_.max_sequences))
    throw Error(fmt::format("decode of {} sequences exceeds max_sequences = {}", slots.size(), options_.max_sequences));
  if (chained && !std::equal(slots.begin(), slots.end(), last_queued_slots_.begin(), last_queued_slots_.end()))
    throw Error("a decode step that takes its ids from the previous step's picks needs the same slots as that "
                "step, in the same order");
  if (!chained) check_ids(ids);
  std::set<int32_t> seen;
  std::vector<SequenceChunk> chunks;
  for (size_t i = 0; i < slots.size(); ++i) {
    check_slot(slots[i]);
    if (!seen.insert(slots[i]).second)
      throw Error(fmt::format("slot {} appears twice in one decode step", slots[i]));
    const int64_t pos = positions_[static_cast<size_t>(slots[i])];
    if (pos + 1 > options_.max_context)
      throw Error(fmt::format("sequence in slot {} is full: it holds max_context = {} tokens; raise max_context",
                              slots[i], options_.max_context));
    chunks.push_back({slots[i], pos, chained ? std::span(&kPlaceholder, 1) : ids.subspan(i, 1)});
  }
  if (!params.empty()) {
    std::vector<ninfer_sample_row> rows;
    for (const RowSampling& p : params)
      rows.push_back({p.temperature, p.top_p, p.min_p, p.seed, p.draw, p.top_k, 0});
    decoder_->set_sample_rows(rows); // ordered before the step on the backend
  }
  decoder_->forward(chunks, pick, chained);
  for (int32_t s : slots) ++positions_[static_cast<size_t>(s)];
}

std::vector<float> CausalLM::decode(std::span<const int32_t> slots, std::span<const int32_t> ids) {
  decode_forward(slots, ids, {}, models::Pick::None, false);
  std::vector<float> out;
  decoder_->logits(0, static_cast<int64_t>(slots.size()), out);
  return out;
}

void CausalLM::check_no_unread_picks(const char* call) const {
  if (decoder_->pending_picks())
    throw Error(fmt::format("{} while queued decode steps have picks not read: call next_picks or drop_queued first",
                            call));
}

// The pick runs in the step's own launch sequence (its recording): the ids come back with the
// step, not after another round of launches.
std::vector<int32_t> CausalLM::decode_greedy(std::span<const int32_t> slots, std::span<const int32_t> ids,
                                             std::vector<float>* logprobs) {
  check_no_unread_picks("decode_greedy");
  enqueue(slots, ids, {}, false);
  return next_picks(logprobs);
}

std::vector<int32_t> CausalLM::decode_sample(std::span<const int32_t> slots, std::span<const int32_t> ids,
                                             std::span<const RowSampling> params, std::vector<float>* logprobs) {
  check_no_unread_picks("decode_sample");
  if (params.size() != slots.size())
    throw Error(fmt::format("decode_sample needs one sampling row per sequence (got {} for {} slots)", params.size(),
                            slots.size()));
  enqueue(slots, ids, params, false);
  return next_picks(logprobs);
}

void CausalLM::queue_decode(std::span<const int32_t> slots, std::span<const int32_t> ids,
                            std::span<const RowSampling> params) {
  enqueue(slots, ids, params, ids.empty());
}

void CausalLM::enqueue(std::span<const int32_t> slots, std::span<const int32_t> ids,
                       std::span<const RowSampling> params, bool chained) {
  if (decoder_->pending_picks() >= models::Decoder::kMostPendingPicks)
    throw Error(fmt::format("{} queued decode steps have picks not read: call next_picks first",
                            decoder_->pending_picks()));
  if (!params.empty() && params.size() != slots.size())
    throw Error(fmt::format("a sampled decode step needs one sampling row per sequence (got {} for {} slots)",
                            params.size(), slots.size()));
  decode_forward(slots, ids, params, params.empty() ? models::Pick::Greedy : models::Pick::Sample, chained);
  last_queued_slots_.assign(slots.begin(), slots.end());
}

std::vector<int32_t> CausalLM::next_picks(std::vector<float>* logprobs) {
  if (!decoder_->pending_picks()) throw Error("next_picks: no queued decode step has picks left to read");
  std::vector<int32_t> out;
  std::vector<float> lp;
  decoder_->read_picks(out, lp);
  if (logprobs) *logprobs = std::move(lp);
  return out;
}

void CausalLM::drop_queued() { decoder_->drop_picks(); }

} // namespace ninfer
