// CausalLM: the public model API over a Decoder — argument checks, slots and positions, prompt
// chunking, logits rows.
#include "ninfer/models/causal_lm.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "decoder.hpp"
#include "model_build.hpp"
#include "ninfer/checkpoint/expected_tensors.hpp"
#include "ninfer/models/memory_plan.hpp"
#include "ninfer/models/model_setup.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/runtime/backend.hpp"

namespace ninfer {

using models::SequenceChunk;

namespace {

// What the plan needs checked before it starts (max_context 0 and kv_capacity 0 are its "auto").
void check_options(const ModelOptions& o) {
  if (o.max_context < 0 || o.max_context > INT32_MAX)
    throw Error(fmt::format("max_context must be in [1, 2^31) tokens, or 0 for what the memory allows (got {})",
                            o.max_context));
  if (o.max_sequences < 1) throw Error(fmt::format("max_sequences must be >= 1 (got {})", o.max_sequences));
  if (o.prefill_chunk < 1) throw Error(fmt::format("prefill_chunk must be >= 1 (got {})", o.prefill_chunk));
  if (o.mixed_chunk < 0 || o.mixed_chunk > o.prefill_chunk)
    throw Error(fmt::format("mixed_chunk must be in [1, prefill_chunk = {}], or 0 for the default rule (got {})",
                            o.prefill_chunk, o.mixed_chunk));
  if (o.kv_capacity < 0) throw Error(fmt::format("kv_capacity must be >= 1 tokens, or 0 for auto (got {})", o.kv_capacity));
  if (const int32_t b = o.kv_block_tokens; b != 0 && (b < 32 || b > 1024 || (b & (b - 1))))
    throw Error(fmt::format("kv_block_tokens must be a power of two from 32 to 1024, or 0 for the default {} (got {})",
                            kKvBlockTokens, b));
  const Speculation& sp = o.speculation;
  if (sp.on() && (sp.draft_tokens < 1 || sp.draft_tokens > kMostDraftTokens))
    throw Error(fmt::format("draft_tokens must be in [1, {}] with speculation {} (got {})", kMostDraftTokens,
                            to_string(sp.method), sp.draft_tokens));
  if (!sp.on() && sp.draft_tokens != 0)
    throw Error(fmt::format("draft_tokens is {} without a speculation method: choose one (mtp) or leave it 0",
                            sp.draft_tokens));
  if (o.prefix_states < 0 || (o.prefix_states > 0 && sp.on()))
    throw Error(fmt::format("prefix_states must be >= 0, and 0 with speculation (got {})", o.prefix_states));
  if (sp.draft_vocab < 0 || (!sp.on() && sp.draft_vocab != 0))
    throw Error(fmt::format("draft_vocab must be >= 1 with a speculation method, or 0 for the whole vocabulary "
                            "(got {}{})",
                            sp.draft_vocab, sp.on() ? "" : " without speculation"));
  if (sp.max_batch < 0 || (!sp.on() && sp.max_batch != 0))
    throw Error(fmt::format("max_batch must be >= 1 with a speculation method, or 0 for no cap (got {}{})",
                            sp.max_batch, sp.on() ? "" : " without speculation"));
}

// The load must allocate what its plan said, part by part: the plan and the load share their
// code (model_build.hpp), so a difference is a bug worth a line in the log.
void compare_with_plan(const MemoryPlan& plan, const MemoryReport& before, const MemoryReport& after) {
  std::string diff;
  for (size_t u = 0; u < plan.parts.exact.size(); ++u) {
    const size_t got = after.in_use[u] - before.in_use[u], want = plan.parts.exact[u];
    if (got != want)
      diff += fmt::format(" {} {} (planned {})", memory_use_name(static_cast<MemoryUse>(u)), got, want);
  }
  if (!diff.empty()) spdlog::warn("the load allocated other than its memory plan:{}", diff);
}

} // namespace

RowSampling row_sampling(const SamplingParams& p, uint64_t seed, uint64_t draw) {
  return {p.is_greedy() ? 0.0 : p.temperature, static_cast<int32_t>(std::min<int64_t>(p.top_k, INT32_MAX)), p.top_p,
          p.min_p, seed, draw};
}

const char* to_string(SpecMethod m) { return m == SpecMethod::Mtp ? "mtp" : "none"; }
const char* to_string(DraftHead h) { return h == DraftHead::Int4 ? "int4" : "lm_head"; }

int32_t kv_cache_dtype(KvCachePrecision p) {
  switch (p) {
    case KvCachePrecision::F16: return NINFER_DTYPE_F16;
    case KvCachePrecision::BF16: return NINFER_DTYPE_BF16;
    case KvCachePrecision::Int8: return NINFER_DTYPE_KV_INT8;
    case KvCachePrecision::Fp8: return NINFER_DTYPE_KV_FP8;
    case KvCachePrecision::Int4r: return NINFER_DTYPE_KV_INT4R;
    case KvCachePrecision::F32:
    case KvCachePrecision::Auto: break;
  }
  return NINFER_DTYPE_F32;
}

const char* to_string(KvCachePrecision p) {
  switch (p) {
    case KvCachePrecision::F32: return "float32";
    case KvCachePrecision::F16: return "float16";
    case KvCachePrecision::BF16: return "bfloat16";
    case KvCachePrecision::Int8: return "int8";
    case KvCachePrecision::Fp8: return "fp8";
    case KvCachePrecision::Int4r: return "int4r";
    case KvCachePrecision::Auto: break;
  }
  return "auto";
}

std::unique_ptr<CausalLM> CausalLM::load(const Checkpoint& ck, Backend& be, const ModelOptions& options) {
  const ModelConfig& cfg = ck.config();
  check_options(options);
  require_all(ck); // every missing or misshapen tensor in one message, before allocating anything
  if (options.speculation.method == SpecMethod::Mtp) require_mtp(ck);
  require_draft_vocab_within(options.speculation.draft_vocab, cfg, "draft_vocab");
  if (const auto extra = unrecognised_tensors(ck); !extra.empty())
    spdlog::warn("{}: {} tensor(s) that no {} layer reads (first: {}); they are ignored", ck.dir().string(),
                 extra.size(), family_name(cfg.family), extra.front());
  auto plan = std::make_unique<MemoryPlan>(plan_memory(ck, plan_target(be), options, load_budget(be)));
  plan->require_fit();
  ModelOptions o = plan->options;
  o.cuda_graphs = o.cuda_graphs && be.can_record();
  const MemoryReport before = be.memory();
  auto decoder = models::build_decoder(ck, be, o);
  compare_with_plan(*plan, before, be.memory());
  decoder->set_decode_recording(o.cuda_graphs);
  spdlog::debug("{} loaded on {} ({} KV cache): {}", family_name(cfg.family), be.plugin().name(), to_string(o.kv_cache),
                be.memory().describe());
  return std::unique_ptr<CausalLM>(new CausalLM(cfg, o, be, std::move(decoder), std::move(plan)));
}

CausalLM::CausalLM(ModelConfig config, ModelOptions options, Backend& backend, std::unique_ptr<models::Decoder> d,
                   std::unique_ptr<MemoryPlan> plan)
    : config_(std::move(config)), options_(options), backend_(backend), decoder_(std::move(d)), plan_(std::move(plan)),
      positions_(static_cast<size_t>(options.max_sequences), 0),
      snapshots_(static_cast<size_t>(options.max_sequences), -1),
      last_pick_(static_cast<size_t>(options.max_sequences)),
      next_on_backend_(static_cast<size_t>(options.max_sequences), false),
      round_unread_(static_cast<size_t>(options.max_sequences), false),
      generation_(static_cast<size_t>(options.max_sequences), 0) {}

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
  const auto i = static_cast<size_t>(slot);
  positions_[i] = 0;
  snapshots_[i] = -1;
  last_pick_[i].reset();
  next_on_backend_[i] = false;
  round_unread_[i] = false;
  ++generation_[i];
}

void CausalLM::save_snapshot(int32_t slot) {
  check_slot(slot);
  if (!options_.state_snapshots) throw Error("save_snapshot: the model was loaded without state_snapshots");
  if (options_.speculation.on())
    throw Error("save_snapshot: a model loaded for speculative decoding keeps each slot's last hidden state, which a "
                "snapshot does not hold");
  decoder_->save_snapshot(slot);
  snapshots_[static_cast<size_t>(slot)] = positions_[static_cast<size_t>(slot)];
}

void CausalLM::restore_snapshot(int32_t slot) {
  check_slot(slot);
  const int64_t at = snapshots_[static_cast<size_t>(slot)];
  if (at < 0) throw Error(fmt::format("restore_snapshot: slot {} has no snapshot", slot));
  decoder_->restore_snapshot(slot);
  positions_[static_cast<size_t>(slot)] = at;
  last_pick_[static_cast<size_t>(slot)].reset();
  next_on_backend_[static_cast<size_t>(slot)] = false;
}

int64_t CausalLM::snapshot_position(int32_t slot) const {
  check_slot(slot);
  return snapshots_[static_cast<size_t>(slot)];
}

bool CausalLM::can_truncate() const {
  return config_.num_layers_of(LayerKind::LinearAttention) == 0 && !options_.speculation.on();
}

void CausalLM::truncate(int32_t slot, int64_t tokens) {
  check_slot(slot);
  if (!can_truncate())
    throw Error(options_.speculation.on()
                    ? "a model loaded for speculative decoding keeps each slot's last hidden state, which cannot be "
                      "rolled back: reset the slot"
                    : "this model has Gated DeltaNet layers, whose recurrent state cannot be rolled back: reset the "
                      "slot");
  const int64_t pos = positions_[static_cast<size_t>(slot)];
  if (tokens < 0 || tokens > pos)
    throw Error(fmt::format("cannot truncate slot {} to {} tokens: it holds {}", slot, tokens, pos));
  positions_[static_cast<size_t>(slot)] = tokens;
  if (snapshots_[static_cast<size_t>(slot)] > tokens) snapshots_[static_cast<size_t>(slot)] = -1;
  last_pick_[static_cast<size_t>(slot)].reset();
  next_on_backend_[static_cast<size_t>(slot)] = false;
}

bool CausalLM::decode_graphs_active() const { return decoder_->decode_recording(); }
size_t CausalLM::decode_graphs_recorded() const { return decoder_->decode_recordings(); }

void CausalLM::assume_context(int32_t slot, int64_t tokens) {
  check_slot(slot);
  if (tokens < 0 || tokens >= options_.max_context)
    throw Error(fmt::format("assumed context of {} tokens does not fit max_context = {}", tokens, options_.max_context));
  // The rows decode reads, and its own (written from `tokens`, where the slot continues).
  const KvWrite need{slot, kv_write_start(tokens), tokens + 1};
  take_kv_blocks(std::span(&need, 1));
  positions_[static_cast<size_t>(slot)] = tokens;
  snapshots_[static_cast<size_t>(slot)] = -1;
  last_pick_[static_cast<size_t>(slot)].reset();
  next_on_backend_[static_cast<size_t>(slot)] = false;
}

void CausalLM::check_no_round(int32_t slot) const {
  if (round_unread_[static_cast<size_t>(slot)])
    throw Error(fmt::format("slot {} has a speculative round whose result is not read: its position is known only "
                            "then (call next_result, or reset the slot)",
                            slot));
}

std::vector<float> CausalLM::prefill(int32_t slot, std::span<const int32_t> ids, LogitsFor which) {
  check_slot(slot);
  check_no_round(slot);
  if (ids.empty()) throw Error("empty prompt: prefill needs at least one token");
  check_ids(ids);
  const int64_t pos = positions_[static_cast<size_t>(slot)];
  if (pos + static_cast<int64_t>(ids.size()) > options_.max_context)
    throw Error(fmt::format("a prompt of {} tokens does not fit: the sequence already holds {} of max_context = {} "
                            "tokens; shorten the prompt or raise max_context",
                            ids.size(), pos, options_.max_context));
  const KvWrite need = kv_write(slot, pos + static_cast<int64_t>(ids.size()));
  take_kv_blocks(std::span(&need, 1));
  std::vector<float> out;
  const int64_t chunk = options_.prefill_chunk;
  try {
    for (int64_t b = 0; b < static_cast<int64_t>(ids.size()); b += chunk) {
      const int64_t n = std::min<int64_t>(chunk, static_cast<int64_t>(ids.size()) - b);
      const SequenceChunk c{slot, pos + b, ids.subspan(static_cast<size_t>(b), static_cast<size_t>(n))};
      decoder_->forward(std::span(&c, 1));
      last_step_tokens_ = n;
      positions_[static_cast<size_t>(slot)] = pos + b + n;
      last_pick_[static_cast<size_t>(slot)].reset();
      next_on_backend_[static_cast<size_t>(slot)] = false;
      if (which == LogitsFor::All) decoder_->logits(0, n, out);
      else if (b + n == static_cast<int64_t>(ids.size())) decoder_->logits(n - 1, 1, out);
    }
  } catch (...) {
    reset(slot); // a half-fed prompt leaves state no caller could use
    throw;
  }
  return out;
}

static_assert(CausalLM::kMostUnreadResults == models::Decoder::kMostPendingPicks);

void CausalLM::check_rows(std::span<const StepRow> rows) const {
  if (rows.empty()) throw Error("a step needs at least one row");
  if (rows.size() > static_cast<size_t>(options_.max_sequences))
    throw Error(fmt::format("a step of {} sequences exceeds max_sequences = {}", rows.size(), options_.max_sequences));
  if (decoder_->pending_picks() >= kMostUnreadResults &&
      std::any_of(rows.begin(), rows.end(), [](const StepRow& r) { return r.pick; }))
    throw Error(fmt::format("{} queued steps have results not read: call next_result first",
                            decoder_->pending_picks()));
  std::set<int32_t> seen;
  for (const StepRow& r : rows) {
    check_slot(r.slot);
    if (!seen.insert(r.slot).second) throw Error(fmt::format("slot {} appears twice in one step", r.slot));
    check_no_round(r.slot);
    check_ids(r.ids);
    const int64_t n = r.ids.empty() ? 1 : static_cast<int64_t>(r.ids.size());
    if (n > 1 && &r != &rows.front())
      throw Error(fmt::format("a prompt chunk ({} tokens for slot {}) must be its step's first row", n, r.slot));
    if (n > options_.prefill_chunk)
      throw Error(fmt::format("a prompt chunk of {} tokens exceeds prefill_chunk = {}", n, options_.prefill_chunk));
    if (n > options_.mixed_chunk && rows.size() > 1)
      throw Error(fmt::format("a prompt chunk of {} tokens beside other rows (a mixed step) exceeds mixed_chunk = {}",
                              n, options_.mixed_chunk));
    const int64_t pos = positions_[static_cast<size_t>(r.slot)];
    if (pos + n > options_.max_context)
      throw Error(fmt::format("sequence in slot {} is full: it holds {} of max_context = {} tokens and the step adds "
                              "{}; raise max_context",
                              r.slot, pos, options_.max_context, n));
    if (r.ids.empty()) {
      const auto& from = last_pick_[static_cast<size_t>(r.slot)];
      if (!from || !decoder_->pick_alive(*from))
        throw Error(fmt::format("slot {} has no queued pick on the backend to take its next token from (none since "
                                "its last reset or prefill, or newer steps have reused its result slot): give the "
                                "token",
                                r.slot));
    }
  }
}

// The step's rows go in as the decoder's chunks; the picks, the sampling rows and the chained
// ids are laid out in the same row order.
void CausalLM::set_host_tally(std::map<std::string, double, std::less<>>* tally) { backend_.set_host_tally(tally); }

void CausalLM::queue_step(std::span<const StepRow> rows) {
  check_rows(rows);
  std::vector<KvWrite> needs;
  for (const StepRow& r : rows)
    needs.push_back(kv_write(r.slot, positions_[static_cast<size_t>(r.slot)] +
                                         (r.ids.empty() ? 1 : static_cast<int64_t>(r.ids.size()))));
  take_kv_blocks(needs);
  static constexpr int32_t kPlaceholder = 0; // a chained row's id is copied in on the backend
  std::vector<SequenceChunk> chunks;
  std::vector<models::ChainedId> chained;
  std::vector<ninfer_sample_row> sampling;
  std::vector<int64_t> logits_rows;
  bool any_pick = false, all_greedy = true;
  int64_t token = 0;
  for (const StepRow& r : rows) {
    const int64_t pos = positions_[static_cast<size_t>(r.slot)];
    chunks.push_back({r.slot, pos, r.ids.empty() ? std::span(&kPlaceholder, 1) : r.ids});
    if (r.ids.empty()) chained.push_back({token, *last_pick_[static_cast<size_t>(r.slot)]});
    token += static_cast<int64_t>(chunks.back().ids.size());
    // A step picks all its rows or none: a decode row without a pick still gets a greedy one.
    const RowSampling& p = r.sampling;
    if (r.pick) any_pick = true;
    if (r.pick && p.temperature > 0) all_greedy = false;
    if (r.pick && r.logits) logits_rows.push_back(static_cast<int64_t>(sampling.size()));
    sampling.push_back({r.pick ? p.temperature : 0.0, p.top_p, p.min_p, p.seed, p.draw, p.top_k, 0});
  }
  models::StepPicks picks;
  if (any_pick) {
    picks.pick = all_greedy ? models::Pick::Greedy : models::Pick::Sample;
    picks.rows = static_cast<int64_t>(rows.size());
    picks.first = token - picks.rows; // a prompt chunk picks its last token; a decode step all
    picks.logits_rows = logits_rows;
    // The sample op's rows are device data uploaded before the step (never part of a recording).
    if (picks.pick == models::Pick::Sample) decoder_->set_sample_rows(sampling);
  }
  const models::Decoder::Queued q = decoder_->forward(chunks, chained, picks);
  last_step_tokens_ = token;
  if (any_pick) pending_rounds_.emplace_back();
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto slot = static_cast<size_t>(rows[i].slot);
    positions_[slot] += static_cast<int64_t>(chunks[i].ids.size());
    if (any_pick)
      last_pick_[slot] = std::make_unique<models::PickRef>(models::PickRef{q.slot, static_cast<int64_t>(i), q.use});
    else last_pick_[slot].reset();
    // With speculation every picking step leaves its picks as the slots' next inputs.
    next_on_backend_[slot] = any_pick && decoder_->speculative();
  }
}

void CausalLM::queue_spec_round(std::span<const SpecRow> rows) {
  if (!decoder_->speculative())
    throw Error("speculative rounds need a model loaded with speculation (ModelOptions::speculation, --spec mtp)");
  if (rows.empty()) throw Error("a speculative round needs at least one row");
  if (rows.size() > static_cast<size_t>(options_.max_sequences))
    throw Error(fmt::format("a round of {} sequences exceeds max_sequences = {}", rows.size(), options_.max_sequences));
  if (decoder_->pending_picks() >= kMostUnreadResults)
    throw Error(fmt::format("{} queued steps have results not read: call next_result first",
                            decoder_->pending_picks()));
  const int64_t span = int64_t{options_.speculation.draft_tokens} + 1;
  std::set<int32_t> seen;
  std::vector<int32_t> forced;
  for (const SpecRow& r : rows) {
    if (r.forced_accept.has_value() != rows.front().forced_accept.has_value())
      throw Error("a round forces the accepted counts of every row or of none");
    if (r.forced_accept) {
      if (*r.forced_accept < 0 || *r.forced_accept > options_.speculation.draft_tokens)
        throw Error(fmt::format("a forced accepted count of {} is outside 0..{} (draft_tokens)", *r.forced_accept,
                                options_.speculation.draft_tokens));
      forced.push_back(*r.forced_accept);
    }
    check_slot(r.slot);
    if (!seen.insert(r.slot).second) throw Error(fmt::format("slot {} appears twice in one round", r.slot));
    check_no_round(r.slot);
    const auto i = static_cast<size_t>(r.slot);
    if (positions_[i] < 1)
      throw Error(fmt::format("slot {} holds no tokens: a round continues a sequence (prefill its prompt first)",
                              r.slot));
    if (r.id) check_ids(std::span(&*r.id, 1));
    else if (!next_on_backend_[i])
      throw Error(fmt::format("slot {} has no next input on the backend (no picking step or round since its last "
                              "reset or prefill): give the token",
                              r.slot));
    if (positions_[i] + span > options_.max_context)
      throw Error(fmt::format("sequence in slot {} is full: it holds {} of max_context = {} tokens and a round writes "
                              "{}; raise max_context",
                              r.slot, positions_[i], options_.max_context, span));
  }
  // A round writes its input and drafts at the next `span` positions, and its draft passes the
  // MTP head's row of the position before them (kv_write_start).
  std::vector<KvWrite> needs;
  for (const SpecRow& r : rows) needs.push_back(kv_write(r.slot, positions_[static_cast<size_t>(r.slot)] + span));
  take_kv_blocks(needs);
  std::vector<models::RoundRow> round;
  PendingRound pending;
  bool sampled = false;
  std::vector<ninfer_sample_row> sampling; // per verification row: row i's draw i, i + 1, ...
  for (const SpecRow& r : rows) {
    const auto i = static_cast<size_t>(r.slot);
    if (r.id) decoder_->set_next_input(r.slot, *r.id);
    round.push_back({r.slot, positions_[i]});
    pending.slots.push_back(r.slot);
    pending.generations.push_back(generation_[i]);
    const RowSampling& p = r.sampling;
    sampled = sampled || p.temperature > 0;
    for (int64_t j = 0; j < span; ++j)
      sampling.push_back({p.temperature, p.top_p, p.min_p, p.seed, p.draw + static_cast<uint64_t>(j), p.top_k, 0});
  }
  // The sample op's rows are device data uploaded before the round (never part of a recording).
  if (sampled) decoder_->set_sample_rows(sampling);
  decoder_->spec_round(round, sampled ? models::Pick::Sample : models::Pick::Greedy, forced, verify_only_rounds_);
  last_step_tokens_ = 0; // a round's rows are not prompt rows
  pending_rounds_.push_back(std::move(pending));
  for (const SpecRow& r : rows) {
    const auto i = static_cast<size_t>(r.slot);
    round_unread_[i] = true;
    next_on_backend_[i] = true;
    last_pick_[i].reset();
  }
}

void CausalLM::check_last_step_rows(int64_t first, int64_t count, const char* what) const {
  if (first < 0 || count < 1 || first + count > last_step_tokens_)
    throw Error(fmt::format("{} of tokens [{}, {}) asked of a step of {} tokens", what, first, first + count,
                            last_step_tokens_));
}

std::vector<float> CausalLM::last_step_logits(int64_t first, int64_t count) {
  check_last_step_rows(first, count, "logits");
  std::vector<float> out;
  decoder_->logits(first, count, out);
  return out;
}

std::vector<float> CausalLM::last_step_draft_logits(int64_t first, int64_t count) {
  if (!decoder_->speculative()) throw Error("draft logits need a model loaded with speculation (--spec mtp)");
  check_last_step_rows(first, count, "draft logits");
  std::vector<float> out;
  decoder_->draft_logits(first, count, out);
  return out;
}

StepResult CausalLM::next_result() {
  if (!decoder_->pending_picks()) throw Error("next_result: no queued step has a result left to read");
  models::PickResult p = decoder_->read_picks();
  const PendingRound round = std::move(pending_rounds_.front());
  pending_rounds_.pop_front();
  // A round's slots advance by what they gained (unless reset since).
  for (size_t r = 0; r < round.slots.size(); ++r) {
    const auto i = static_cast<size_t>(round.slots[r]);
    if (generation_[i] != round.generations[r]) continue;
    positions_[i] += int64_t{p.accepted[r]} + 1;
    round_unread_[i] = false;
  }
  return {std::move(p.ids), std::move(p.logprobs), std::move(p.logits), std::move(p.accepted)};
}

size_t CausalLM::unread_results() const { return decoder_->pending_picks(); }

// A dropped round leaves its slots' positions unknown: they stay marked until reset.
void CausalLM::drop_results() {
  decoder_->drop_picks();
  pending_rounds_.clear();
}

} // namespace ninfer
