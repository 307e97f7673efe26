// Speculative decoding in the decoder (docs/speculative.md): the MTP head's pass after every step,
// which keeps the head's KV cache one position behind the model's, and the speculative round:
// drafts, one verification pass, acceptance and the settling of every slot, all on the backend
// in one launch sequence, so a round can be recorded once per (rows, context bucket, drafts) and
// no acceptance length is ever part of a recording.
#include <fmt/format.h>

#include <algorithm>

#include "decoder.hpp"
#include "draft_head.hpp"
#include "mtp_head.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer::models {
namespace {

ops::Rows rows_of(const DeviceBuffer& b, int64_t width) { return {b.as<float>(), width}; }
std::span<const int32_t> span_of(const std::vector<int32_t>& v) { return {v.data(), v.size()}; }

} // namespace

void Decoder::allocate_speculation() {
  const auto slots = static_cast<size_t>(limits_.max_sequences);
  const auto rows = static_cast<size_t>(std::max<int64_t>(1, limits_.max_tokens));
  const size_t row = sizeof(float) * static_cast<size_t>(hidden_);
  const size_t drafts = static_cast<size_t>(limits_.draft_tokens) + 1;
  mtp_inputs_ = std::make_unique<StepInputs>(be_, limits_);
  // Per slot, what a sequence carries between steps besides its KV and recurrent state.
  slot_hidden_ = be_.allocate(slots * row, MemoryUse::State, "last hidden state per slot (mtp)");
  next_ids_ = be_.allocate(slots * sizeof(int32_t), MemoryUse::State, "next input per slot (mtp)");
  slot_draft_row_ = be_.allocate(slots * row, MemoryUse::State, "first draft row per slot (mtp)");
  draft_row_ready_.assign(slots, 0);
  if (limits_.int4_draft_head) draft_head_ = int4_draft_rows(be_, lm_head(), draft_vocab());
  draft_ids_ = be_.allocate(drafts * slots * sizeof(int32_t), MemoryUse::Activations, "draft tokens");
  be_.zero(draft_ids_, 0, draft_ids_.bytes()); // ids in range for a round that verifies only
  mtp_rows_ = be_.allocate(rows * row, MemoryUse::Activations, "mtp rows");
  keep_rows_ = be_.allocate(slots * sizeof(int32_t), MemoryUse::Activations, "accepted row per sequence");
  forced_accepts_ = be_.allocate(2 * slots * sizeof(int32_t), MemoryUse::Activations, "forced accepted counts");
  // The most index arrays one step uploads: an MTP pass's five (rows, two hidden sources, the
  // sequences' last tokens) or a round's two (draft positions, the verification layout).
  const size_t most = std::max(4 * rows + slots, 2 * drafts * slots);
  indices_ = be_.allocate(most * sizeof(int32_t), MemoryUse::Activations, "step index arrays");
  host_indices_.reserve(most);
  // The recurrent layers' kept states, grouped by width (in layer order within a group).
  for (const Layer& l : parts_.layers)
    for (const Mixer::KeptState& k : l.mixer->kept_states()) {
      auto g = std::find_if(kept_states_.begin(), kept_states_.end(),
                            [&](const KeptStates& e) { return e.words == k.words; });
      if (g == kept_states_.end()) g = kept_states_.insert(kept_states_.end(), KeptStates{k.words, {}, {}, {}});
      g->slots.push_back(k.slots);
      g->tokens.push_back(k.tokens);
    }
  for (KeptStates& g : kept_states_) {
    if (g.slots.size() < 2) continue; // one layer: copy_rows takes its buffers directly
    std::vector<const void*> bases(g.slots.begin(), g.slots.end());
    bases.insert(bases.end(), g.tokens.begin(), g.tokens.end());
    g.bases = be_.allocate(sizeof(void*) * bases.size(), MemoryUse::Activations, "kept state base pointers");
    be_.upload(g.bases, 0, bases.data(), sizeof(void*) * bases.size());
  }
}

void Decoder::draft_lm_head(int64_t rows, ops::Rows x, ops::Rows logits) {
  if (draft_head_.rows) ops::linear(be_, rows, x, draft_head_, logits);
  else ops::linear_first_rows(be_, rows, x, lm_head(), draft_vocab(), logits);
}

void Decoder::keep_token_states(int32_t seqs, const int32_t* slots, const int32_t* rows) {
  for (const KeptStates& g : kept_states_) {
    const auto n = static_cast<int64_t>(g.slots.size());
    if (n == 1) {
      ops::copy_rows(be_, seqs, g.words, g.slots[0], g.words, slots, g.tokens[0], g.words, rows);
      continue;
    }
    void* const* dst = static_cast<void* const*>(g.bases.data());
    const void* const* src = dst + n;
    ops::copy_row_groups(be_, n, seqs, g.words, dst, g.words, slots, src, g.words, rows);
  }
}

void Decoder::fork_speculation(int32_t src, int32_t dst) {
  const size_t row = sizeof(float) * static_cast<size_t>(hidden_), id = sizeof(int32_t);
  be_.copy(slot_hidden_, static_cast<size_t>(dst) * row, slot_hidden_, static_cast<size_t>(src) * row, row);
  be_.copy(next_ids_, static_cast<size_t>(dst) * id, next_ids_, static_cast<size_t>(src) * id, id);
  be_.copy(slot_draft_row_, static_cast<size_t>(dst) * row, slot_draft_row_, static_cast<size_t>(src) * row, row);
  draft_row_ready_[static_cast<size_t>(dst)] = draft_row_ready_[static_cast<size_t>(src)];
}

const int32_t* Decoder::add_index(std::span<const int32_t> values) {
  const int32_t* at = indices_.as<const int32_t>() + host_indices_.size();
  host_indices_.insert(host_indices_.end(), values.begin(), values.end());
  if (host_indices_.size() * sizeof(int32_t) > indices_.bytes())
    throw Error("internal: a step's index arrays exceed their buffer");
  return at;
}

void Decoder::upload_indices() {
  if (!host_indices_.empty()) be_.upload(indices_, 0, host_indices_.data(), sizeof(int32_t) * host_indices_.size());
  host_indices_.clear();
}

int32_t* Decoder::device_ids(const Step& s) const { return const_cast<int32_t*>(s.ids); }

void Decoder::set_next_input(int32_t slot, int32_t id) {
  forget_draft_row(slot);
  be_.upload(next_ids_, sizeof(int32_t) * static_cast<size_t>(slot), &id, sizeof(int32_t));
}

// Token p of a sequence (p >= 1) gives the head's row at position p - 1: the token and the
// model's hidden state at p - 1, which is this step's previous row, or for the sequence's first
// token here the slot's last hidden state. A token at position 0 has no row.
Decoder::MtpPass Decoder::prepare_mtp_pass(std::span<const SequenceChunk> chunks, const Step& s) {
  static const std::vector<int32_t> kPlaceholders(static_cast<size_t>(limits_.max_tokens), 0);
  std::vector<SequenceChunk> rows;
  std::vector<int32_t> from, step_dst, step_src, slot_dst, slot_src, last;
  int32_t t = 0;
  for (const SequenceChunk& c : chunks) {
    const auto n = static_cast<int32_t>(c.ids.size());
    const int32_t skip = c.first_position == 0 ? 1 : 0;
    if (n > skip)
      rows.push_back({c.slot, c.first_position + skip - 1, std::span(kPlaceholders.data(), static_cast<size_t>(n - skip))});
    for (int32_t j = skip; j < n; ++j) {
      const auto r = static_cast<int32_t>(from.size());
      from.push_back(t + j);
      if (j == 0) {
        slot_dst.push_back(r);
        slot_src.push_back(c.slot);
      } else {
        step_dst.push_back(r);
        step_src.push_back(t + j - 1);
      }
    }
    last.push_back(t + n - 1);
    t += n;
  }
  mtp_row_of_token_.assign(static_cast<size_t>(t), -1);
  for (size_t r = 0; r < from.size(); ++r) mtp_row_of_token_[static_cast<size_t>(from[r])] = static_cast<int32_t>(r);
  MtpPass m;
  if (!rows.empty()) {
    m.step = mtp_inputs_->upload(rows);
    // The head's rows attend where the model's did one position later: the same bucket bounds
    // them, so a recording made for the step's shape serves its pass too.
    if (m.step.max_seq_tokens == 1) m.step.kv_len = s.kv_len;
    else if (m.step.chunk_tokens) m.step.kv_len = m.step.chunk_kv_len = m.step.rows_kv_len = s.kv_len;
  }
  m.from = add_index(span_of(from));
  m.step_dst = add_index(span_of(step_dst));
  m.step_src = add_index(span_of(step_src));
  m.slot_dst = add_index(span_of(slot_dst));
  m.slot_src = add_index(span_of(slot_src));
  m.last = add_index(span_of(last));
  m.from_step = static_cast<int64_t>(step_dst.size());
  m.from_slot = static_cast<int64_t>(slot_dst.size());
  upload_indices();
  return m;
}

void Decoder::run_mtp_pass(const Step& s, const MtpPass& m, bool picked) {
  const int64_t H = hidden_;
  const ops::Rows head = rows_of(mtp_rows_, H);
  if (m.step.tokens > 0) {
    ops::copy_rows(be_, m.step.tokens, 1, device_ids(m.step), 1, nullptr, s.ids, 1, m.from);
    if (m.from_step) ops::copy_rows(be_, m.from_step, H, head.p, H, m.step_dst, normed_.data(), H, m.step_src);
    if (m.from_slot) ops::copy_rows(be_, m.from_slot, H, head.p, H, m.slot_dst, slot_hidden_.data(), H, m.slot_src);
    mtp_->forward(be_, m.step, parts_.embedding, head, scratch_, head);
  }
  // What the slots' next steps pair with their first tokens (read above before it changes).
  ops::copy_rows(be_, s.num_seqs, H, slot_hidden_.data(), H, s.batch.seq_slot, normed_.data(), H, m.last);
  // A step picks one row per sequence, in sequence order.
  if (picked) ops::copy_rows(be_, s.num_seqs, 1, next_ids_.data(), 1, s.batch.seq_slot, picks_.data(), 1, nullptr);
}

void Decoder::draft_logits(int64_t first, int64_t count, std::vector<float>& out) {
  if (!mtp_) throw Error("internal: draft logits of a model loaded without speculation");
  const int64_t V = vocab();
  for (int64_t t = first; t < first + count; ++t) {
    const int32_t r = t >= 0 && t < static_cast<int64_t>(mtp_row_of_token_.size()) ? mtp_row_of_token_[static_cast<size_t>(t)] : -1;
    if (r < 0) throw Error(fmt::format("token {} of the last step has no MTP head row (it is at position 0)", t));
    const ops::Rows src{mtp_rows_.as<float>() + int64_t{r} * hidden_, hidden_};
    ops::linear(be_, 1, src, lm_head(), rows_of(logits_, V));
    const size_t at = out.size();
    out.resize(at + static_cast<size_t>(V));
    be_.download(logits_, 0, out.data() + at, sizeof(float) * static_cast<size_t>(V));
  }
}

Decoder::Queued Decoder::spec_round(std::span<const RoundRow> rows, Pick pick, std::span<const int32_t> forced,
                                    bool verify_only) {
  if (!mtp_) throw Error("internal: a speculative round on a model loaded without speculation");
  if (pending_.size() >= kMostPendingPicks)
    throw Error(fmt::format("internal: {} picks are already waiting to be read", pending_.size()));
  const int32_t K = limits_.draft_tokens, D = K + 1;
  const auto B = static_cast<int32_t>(rows.size());
  if (!forced.empty()) {
    if (forced.size() != rows.size()) throw Error("internal: forced accepted counts are not one per round row");
    // Device data uploaded before the round (never part of a recording): the counts, then the
    // rows they keep (draft_accept's two outputs).
    std::vector<int32_t> up(forced.begin(), forced.end());
    // Each count is in 0..K (CausalLM::queue_spec_round checks them).
    for (int32_t i = 0; i < B; ++i) up.push_back(i * D + forced[static_cast<size_t>(i)]);
    be_.upload(forced_accepts_, 0, up.data(), sizeof(int32_t) * up.size());
  }
  // The verification pass: every row's next input and its K drafts, at its next K + 1 positions
  // (the ids are placed on the backend by the round itself).
  static const std::vector<int32_t> kPlaceholders(static_cast<size_t>(kMostDraftTokens) + 1, 0);
  std::vector<SequenceChunk> chunks;
  int64_t end = 0;
  for (const RoundRow& r : rows) {
    chunks.push_back({r.slot, r.position, std::span(kPlaceholders.data(), static_cast<size_t>(D))});
    end = std::max(end, r.position + D);
  }
  Queued q;
  q.step = inputs_.upload(chunks);
  Step& v = q.step;
  // Every attention of the round (the drafts', the verification's, the head's catch-up) is
  // planned for one bucket covering its last position, so the round's recording depends on
  // (rows, bucket, drafts) alone.
  v.kv_len = decode_bucket(static_cast<int32_t>(end));
  v.keep_token_states = true;
  // Draft pass k (1..K) pairs draft k - 1 (the next input for k = 1) with the hidden state of
  // the position before it: it sits at position + k - 2. The draft table is [D][B]; the
  // verification pass reads row i * D + k of it as entry (k, i).
  std::vector<int32_t> draft_pos, to_verify;
  for (int32_t k = 1; k <= K; ++k)
    for (const RoundRow& r : rows) draft_pos.push_back(static_cast<int32_t>(r.position + k - 2));
  for (int32_t k = 0; k < D; ++k)
    for (int32_t i = 0; i < B; ++i) to_verify.push_back(i * D + k);
  const int32_t* pos = add_index(span_of(draft_pos));
  const int32_t* layout = add_index(span_of(to_verify));
  upload_indices();
  // A round whose every row follows a round (with its catch-up) starts from the rows that
  // catch-up kept; one row without them and every row runs the first draft pass.
  RoundKind kind{!forced.empty(), verify_only, !verify_only};
  for (const RoundRow& r : rows) kind.chained = kind.chained && draft_row_ready_[static_cast<size_t>(r.slot)];
  run_decode_step({B, v.kv_len, pick, K, (kind.forced ? 1 : 0) | (verify_only ? 2 : 0) | (kind.chained ? 4 : 0), 0, 0},
                  [&] { run_round(v, pos, layout, pick, kind); });
  send_picks(int64_t{B} * D, {}, q, B);
  mtp_row_of_token_.clear(); // the head's rows now hold the round's catch-up
  for (const RoundRow& r : rows) draft_row_ready_[static_cast<size_t>(r.slot)] = verify_only ? 0 : 1;
  return q;
}

void Decoder::run_round(const Step& v, const int32_t* draft_pos, const int32_t* to_verify, Pick pick,
                        RoundKind kind) {
  const bool verify_only = kind.verify_only;
  const int32_t K = limits_.draft_tokens, D = K + 1, B = v.num_seqs;
  const int64_t H = hidden_, V = vocab();
  const ops::Rows head = rows_of(mtp_rows_, H), normed = rows_of(normed_, H), logits = rows_of(logits_, V);
  auto* table = draft_ids_.as<int32_t>();
  const int32_t* slots = v.batch.seq_slot;
  // Each sequence's next input, and the hidden state of the position before it; a chained round
  // takes the head's output for that pair instead (the last catch-up's) and drafts from it.
  ops::copy_rows(be_, B, 1, table, 1, nullptr, next_ids_.data(), 1, slots);
  ops::copy_rows(be_, B, H, head.p, H, nullptr, (kind.chained ? slot_draft_row_ : slot_hidden_).data(), H, slots);
  if (kind.chained) {
    draft_lm_head(B, head, logits);
    ops::argmax(be_, B, logits, static_cast<int32_t>(draft_vocab()), table + B, nullptr);
  }
  for (int32_t k = kind.chained ? 2 : 1; k <= K && !verify_only; ++k) {
    Step d;
    d.tokens = B;
    d.num_seqs = B;
    d.max_seq_tokens = 1;
    d.kv_len = v.kv_len;
    d.ids = table + int64_t{k - 1} * B;
    d.batch = {B, v.ramp, slots, draft_pos + int64_t{k - 1} * B, v.ramp};
    d.ramp = v.ramp;
    // The head's output is the next draft's hidden state (in place) and its logits' argmax the
    // draft.
    mtp_->forward(be_, d, parts_.embedding, head, scratch_, head);
    draft_lm_head(B, head, logits);
    ops::argmax(be_, B, logits, static_cast<int32_t>(draft_vocab()), table + int64_t{k} * B, nullptr);
  }
  ops::copy_rows(be_, int64_t{B} * D, 1, device_ids(v), 1, to_verify, table, 1, nullptr);
  run_layers(v);
  const int64_t n = int64_t{B} * D;
  auto* picked = picks_.as<int32_t>();
  ops::linear(be_, n, normed, lm_head(), logits);
  // A sampled pick that equals the draft keeps it: the draft is accepted with its probability,
  // and a pick that differs is a draw from the rest (speculative sampling of a point-mass draft).
  if (pick == Pick::Sample)
    ops::sample(be_, n, logits, static_cast<int32_t>(V), sample_params_.as<ninfer_sample_row>(), picked,
                picks_.as<float>() + n);
  else
    ops::argmax(be_, n, logits, static_cast<int32_t>(V), picked, picks_.as<float>() + n);
  // The picks of a round are followed by its accepted counts (send_picks).
  const auto* keep = keep_rows_.as<const int32_t>();
  ops::draft_accept(be_, B, K, v.ids, picked, picked + 2 * n, keep_rows_.as<int32_t>());
  if (kind.forced) { // the verification still ran in full: only what it kept is replaced
    const auto* f = forced_accepts_.as<const int32_t>();
    ops::copy_rows(be_, B, 1, picked + 2 * n, 1, nullptr, f, 1, nullptr);
    ops::copy_rows(be_, B, 1, keep_rows_.as<int32_t>(), 1, nullptr, f + B, 1, nullptr);
  }
  // Every slot settles at its kept row: the recurrent layers' state after it, the model's
  // hidden state there, and its pick as the next input. KV rows past it are never read.
  keep_token_states(B, slots, keep);
  ops::copy_rows(be_, B, H, slot_hidden_.data(), H, slots, normed_.data(), H, keep);
  ops::copy_rows(be_, B, 1, next_ids_.data(), 1, slots, picked, 1, keep);
  // The head catches up over the verified rows: row j pairs pick j (draft j + 1 where it was
  // accepted) with the model's hidden state at position + j, so its KV cache holds the accepted
  // positions as a plain step would have left it (rows past them are rewritten next round).
  if (verify_only) return;
  Step c = v;
  c.keep_token_states = false;
  c.ids = picked;
  mtp_->forward(be_, c, parts_.embedding, normed, scratch_, head);
  // Its kept row pairs the slot's next input with its last hidden state: the next round's first
  // draft row.
  ops::copy_rows(be_, B, H, slot_draft_row_.data(), H, slots, head.p, H, keep);
}

// The largest round and the head's passes over the largest steps, planned as a load plans them
// (Decoder::reserve_workspace): a plugin that cannot run them fails here, at load.
void Decoder::reserve_round_workspace() {
  const int32_t ctx = static_cast<int32_t>(limits_.max_context);
  const int64_t T = limits_.max_tokens;
  const int32_t S = limits_.max_sequences, D = limits_.draft_tokens + 1;
  const ops::Rows head = rows_of(mtp_rows_, hidden_);
  mtp_->forward(be_, mtp_inputs_->shape_only(T, 1, static_cast<int32_t>(T), ctx), parts_.embedding, head, scratch_,
                head);
  mtp_->forward(be_, mtp_inputs_->shape_only(S, S, 1, ctx), parts_.embedding, head, scratch_, head);
  const ops::Rows logits = rows_of(logits_, vocab());
  draft_lm_head(S, head, logits);
  ops::argmax(be_, S, logits, static_cast<int32_t>(draft_vocab()), nullptr, nullptr);
  if (limits_.max_mixed_chunk > 1 && S > 1)
    mtp_->forward(be_, mtp_inputs_->mixed_shape_only(limits_.max_mixed_chunk, S - 1, ctx), parts_.embedding, head,
                  scratch_, head);
  for (int64_t width : {int64_t{1}, hidden_}) ops::copy_rows(be_, T, width, nullptr, width, nullptr, nullptr, width, nullptr);
  Step v = inputs_.shape_only(int64_t{S} * D, S, D, ctx);
  v.keep_token_states = true;
  run_layers(v);
  v.keep_token_states = false;
  mtp_->forward(be_, v, parts_.embedding, head, scratch_, head);
  ops::draft_accept(be_, S, D - 1, nullptr, nullptr, nullptr, nullptr);
  keep_token_states(S, nullptr, nullptr);
}

} // namespace ninfer::models
