#include "decoder.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kv_block_pool.hpp"
#include "mtp_head.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer::models {
namespace {

ops::Rows rows_of(const DeviceBuffer& b, int64_t width) { return {b.as<float>(), width}; }

// Bytes of one pick of `rows` rows: ids, then log-probabilities.
size_t pick_bytes(int64_t rows) { return 2 * sizeof(int32_t) * static_cast<size_t>(rows); }

} // namespace

Decoder::Decoder(Backend& be, DecoderParts parts, const StepLimits& limits, std::unique_ptr<KvBlockPool> kv_pool,
                 std::unique_ptr<MtpHead> mtp)
    : be_(be), parts_(std::move(parts)), limits_(limits), kv_pool_(std::move(kv_pool)), inputs_(be, limits),
      mtp_(std::move(mtp)),
      hidden_(parts_.embedding.cols) {
  if (mtp_ && limits.draft_tokens < 1) throw Error("internal: an MTP head without drafts per round");
  for (const auto& l : parts_.layers) needs_ = needs_.max(l.mixer->needs()).max(l.mlp->needs());
  if (mtp_) needs_ = needs_.max(mtp_->needs());
  const int64_t T = limits.max_tokens;
  auto act = [&](int64_t per_token, const char* what) {
    return be.allocate(sizeof(float) * std::max<int64_t>(1, T * per_token), MemoryUse::Activations, what);
  };
  residual_ = act(hidden_, "residual stream");
  normed_ = act(hidden_, "normed hidden");
  proj_ = act(needs_.proj, "projections");
  inner_ = act(needs_.inner, "inner activations");
  core_ = act(needs_.core, "GDN core output");
  gates_ = act(needs_.gates, "GDN gates");
  // Every sequence of a decode step gets its logits row at once (and every row of a speculative
  // round's verification); long prompts that want all rows get them in slices, so a 151k
  // vocabulary never needs [prefill_chunk, vocab] floats.
  const int64_t round_rows = int64_t{limits.max_sequences} * (limits.draft_tokens + 1);
  logit_rows_ = std::max<int64_t>({limits.max_sequences, std::min<int64_t>(T, 64), round_rows});
  logits_ = be.allocate(sizeof(float) * logit_rows_ * vocab(), MemoryUse::Activations, "logits");
  // A round's accepted counts follow its picks.
  picks_ = be.allocate(pick_bytes(logit_rows_) + sizeof(int32_t) * static_cast<size_t>(limits.max_sequences),
                       MemoryUse::Activations, "picked token ids and log-probabilities");
  kept_picks_ = be.allocate(kMostPendingPicks * pick_bytes(logit_rows_), MemoryUse::Activations,
                            "picked token ids kept for later steps");
  // A result slot: the picks, then the logits rows the host asked for.
  be.reserve_results(logits_offset() + sizeof(float) * static_cast<size_t>(most_logits_rows() * vocab()));
  sample_params_ = be.allocate(sizeof(ninfer_sample_row) * logit_rows_, MemoryUse::Activations, "sampling parameters");
  scratch_ = {rows_of(proj_, needs_.proj), rows_of(inner_, needs_.inner), rows_of(core_, needs_.core),
              gates_.as<float>()};
  if (mtp_) allocate_speculation();
  reserve_workspace();
}

Decoder::~Decoder() = default;

void Decoder::run_layers(const Step& s) {
  const int64_t T = s.tokens;
  const ops::Rows resid = rows_of(residual_, hidden_), normed = rows_of(normed_, hidden_);
  const auto scale = parts_.norm_scale;
  const float eps = parts_.eps;
  ops::embedding(be_, s, parts_.embedding, resid);
  // The residual stream lives in `resid`: each block reads it through its norm (folded into its
  // first projection in decode) and its last projection adds the block's output to it.
  for (Layer& l : parts_.layers) {
    l.mixer->forward(be_, s, scratch_, {resid, &l.input_norm, scale, eps, normed}, resid);
    l.mlp->forward(be_, s, scratch_, {resid, &l.post_norm, scale, eps, normed}, resid);
  }
  ops::rms_norm(be_, T, resid, nullptr, parts_.final_norm, scale, eps, normed);
}

Decoder::Queued Decoder::forward(std::span<const SequenceChunk> chunks, std::span<const ChainedId> chained,
                                 const StepPicks& picks) {
  const Pick pick = picks.pick;
  if (pick != Pick::None && pending_.size() >= kMostPendingPicks)
    throw Error(fmt::format("internal: {} picks are already waiting to be read", pending_.size()));
  for (const ChainedId& c : chained)
    if (!pick_alive(c.from)) throw Error("internal: a chained id's pick is no longer on the backend");
  for (const SequenceChunk& c : chunks) forget_draft_row(c.slot);
  if (pick != Pick::None && static_cast<int64_t>(picks.logits_rows.size()) > most_logits_rows())
    throw Error(fmt::format("internal: {} logits rows exceed the {} one step brings back", picks.logits_rows.size(),
                            most_logits_rows()));
  for (size_t i = 0; i < picks.logits_rows.size(); ++i)
    if (picks.logits_rows[i] < (i ? picks.logits_rows[i - 1] + 1 : 0) || picks.logits_rows[i] >= picks.rows)
      throw Error(fmt::format("internal: logits row {} of a pick of {} rows", picks.logits_rows[i], picks.rows));
  Queued q;
  q.step = inputs_.upload(chunks);
  Step& s = q.step;
  if (pick != Pick::None && (picks.rows < 1 || picks.first < 0 || picks.first + picks.rows > s.tokens))
    throw Error(fmt::format("internal: picked rows [{}, {}) of a step of {} tokens", picks.first,
                            picks.first + picks.rows, s.tokens));
  // Ids from earlier picks are plain device data, like the uploaded ids: written before the
  // step's launches, so a recording never holds which pick fed which row.
  copy_chained(chained);
  if (s.max_seq_tokens == 1) s.kv_len = decode_bucket(s.kv_len);
  else if (s.chunk_tokens) // both parts attend as steps of one bucket (keys past a row are never read)
    s.kv_len = s.chunk_kv_len = s.rows_kv_len = decode_bucket(std::max(s.chunk_kv_len, s.rows_kv_len));
  MtpPass mtp_pass;
  if (mtp_) mtp_pass = prepare_mtp_pass(chunks, s);
  const auto work = [&] {
    run_layers(s);
    if (pick != Pick::None) run_pick(picks.first, picks.rows, pick);
    if (mtp_) run_mtp_pass(s, mtp_pass, pick != Pick::None);
  };
  if (s.max_seq_tokens == 1) {
    run_decode_step({s.tokens, s.kv_len, pick, 0, mtp_pass.step.tokens, 0, 0}, work);
  } else if (s.chunk_tokens && s.chunk_tokens == limits_.max_mixed_chunk) {
    // A mixed step beside decoding sequences has the same shape step after step (a chunk of
    // mixed_chunk tokens and the same rows), so it is recorded like a decode step; its picked
    // rows are part of the recording. A prompt's shorter last chunk runs eagerly: its length
    // follows the prompt's, and recording each would grow the recordings without bound.
    run_decode_step({s.tokens, s.kv_len, pick, 0, mtp_pass.step.tokens, s.chunk_tokens,
                     pick == Pick::None ? 0 : (picks.first << 32) | picks.rows},
                    work);
  } else {
    work(); // a prompt chunk alone, or a mixed step's last chunk: its length varies
  }
  if (pick != Pick::None) send_picks(picks.rows, picks.logits_rows, q);
  return q;
}

void Decoder::copy_chained(std::span<const ChainedId> chained) {
  for (size_t i = 0; i < chained.size();) {
    size_t n = 1;
    while (i + n < chained.size() && chained[i + n].token == chained[i].token + static_cast<int64_t>(n) &&
           chained[i + n].from.slot == chained[i].from.slot &&
           chained[i + n].from.row == chained[i].from.row + static_cast<int64_t>(n))
      ++n;
    const PickRef& f = chained[i].from;
    inputs_.copy_ids(chained[i].token, kept_picks_, f.slot * pick_bytes(logit_rows_) + sizeof(int32_t) * f.row,
                     static_cast<int64_t>(n));
    i += n;
  }
}

bool Decoder::pick_alive(const PickRef& ref) const {
  return ref.slot < kMostPendingPicks && ref.use != 0 && slot_uses_[ref.slot] == ref.use && ref.row >= 0 &&
         ref.row < slot_rows_[ref.slot];
}

size_t Decoder::decode_recordings() const {
  size_t n = 0;
  for (const auto& [shape, rec] : recordings_) n += rec != nullptr;
  return n;
}

int32_t Decoder::decode_bucket(int32_t kv_len) const {
  constexpr int32_t kMinDecodeBucket = 256;
  int64_t b = kMinDecodeBucket;
  while (b < kv_len) b *= 2;
  return static_cast<int32_t>(std::min<int64_t>(b, limits_.max_context));
}

// The step's inputs live at addresses fixed by its token count (StepInputs; a decode step has
// one token per sequence) and every buffer is allocated once, so a recording made for a
// DecodeShape stays valid for every later step of that shape.
void Decoder::run_decode_step(const DecodeShape& shape, const std::function<void()>& launch) {
  if (!record_decode_) return launch();
  // The first step of a shape runs eagerly: whatever a variant sets up on first use (a library
  // handle, an algorithm choice) happens outside a capture; the recording is made the next time.
  // (A shape's entry exists from its first step; it holds a recording from its second.)
  const auto [it, first_step] = recordings_.try_emplace(shape);
  if (first_step) return launch();
  auto& rec = it->second;
  if (!rec) {
    try {
      rec = be_.record(launch);
    } catch (const Error& e) {
      recordings_.clear();
      record_decode_ = false;
      spdlog::warn("CUDA graphs off: a decode step could not be recorded ({}); launching kernels one by one", e.what());
      return launch();
    }
  }
  be_.replay(*rec);
}

void Decoder::logits(int64_t first, int64_t count, std::vector<float>& out) {
  const int64_t V = vocab();
  const size_t at = out.size();
  out.resize(at + static_cast<size_t>(count * V));
  for (int64_t r = 0; r < count; r += logit_rows_) {
    const int64_t n = std::min(logit_rows_, count - r);
    const ops::Rows src{normed_.as<float>() + (first + r) * hidden_, hidden_};
    ops::linear(be_, n, src, lm_head(), rows_of(logits_, V));
    be_.download(logits_, 0, out.data() + at + r * V, sizeof(float) * n * V);
  }
}

void Decoder::set_sample_rows(std::span<const ninfer_sample_row> rows) {
  if (static_cast<int64_t>(rows.size()) > logit_rows_)
    throw Error(fmt::format("internal: {} sampling rows exceed the {} rows of one pick", rows.size(), logit_rows_));
  be_.upload(sample_params_, 0, rows.data(), sizeof(ninfer_sample_row) * rows.size());
}

// The pick writes n ids, then their n log-probabilities, into picks_ (a decode step's pick is
// part of its recording).
void Decoder::run_pick(int64_t first, int64_t n, Pick pick) {
  if (n > logit_rows_) throw Error(fmt::format("internal: a pick of {} rows exceeds {} rows", n, logit_rows_));
  const int64_t V = vocab();
  const ops::Rows src{normed_.as<float>() + first * hidden_, hidden_};
  ops::linear(be_, n, src, lm_head(), rows_of(logits_, V));
  if (pick == Pick::Greedy)
    ops::argmax(be_, n, rows_of(logits_, V), static_cast<int32_t>(V), picks_.as<int32_t>(), picks_.as<float>() + n);
  else
    ops::sample(be_, n, rows_of(logits_, V), static_cast<int32_t>(V), sample_params_.as<ninfer_sample_row>(),
                picks_.as<int32_t>(), picks_.as<float>() + n);
}

// Outside the recordings: the result slots are used in turn, so a pick still unread is never
// overwritten by a newer one. The slot's copy on the backend is what later steps chain from
// (picks_ itself belongs to the next picking step); the logits rows go out in runs of
// consecutive rows, after the ids.
void Decoder::send_picks(int64_t n, std::span<const int64_t> logits_rows, Queued& q, int64_t accepted) {
  const size_t slot = next_result_slot_;
  next_result_slot_ = (next_result_slot_ + 1) % kMostPendingPicks;
  be_.copy(kept_picks_, slot * pick_bytes(logit_rows_), picks_, 0, pick_bytes(n));
  be_.download_async(picks_, 0, pick_bytes(n) + sizeof(int32_t) * static_cast<size_t>(accepted), slot);
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(vocab());
  for (size_t i = 0; i < logits_rows.size();) {
    size_t k = 1;
    while (i + k < logits_rows.size() && logits_rows[i + k] == logits_rows[i] + static_cast<int64_t>(k)) ++k;
    be_.download_async(logits_, row_bytes * static_cast<size_t>(logits_rows[i]), row_bytes * k, slot,
                       logits_offset() + row_bytes * i);
    i += k;
  }
  // A round's picks feed no chained row: its sequences continue from their next inputs.
  slot_rows_[slot] = accepted ? 0 : n;
  q.slot = slot;
  q.use = ++slot_uses_[slot];
  pending_.push_back({slot, n, static_cast<int64_t>(logits_rows.size()), accepted});
}

PickResult Decoder::read_picks() {
  static_assert(sizeof(int32_t) == sizeof(float));
  if (pending_.empty()) throw Error("internal: no pick is waiting to be read");
  const PendingPick p = pending_.front();
  pending_.pop_front();
  const auto* got = static_cast<const unsigned char*>(be_.downloaded(p.slot));
  const auto n = static_cast<size_t>(p.rows);
  PickResult r;
  r.ids.resize(n);
  r.logprobs.resize(n);
  std::memcpy(r.ids.data(), got, sizeof(int32_t) * n);
  std::memcpy(r.logprobs.data(), got + sizeof(int32_t) * n, sizeof(float) * n);
  r.accepted.resize(static_cast<size_t>(p.accepted));
  std::memcpy(r.accepted.data(), got + pick_bytes(p.rows), sizeof(int32_t) * r.accepted.size());
  r.logits.resize(static_cast<size_t>(p.logits_rows * vocab()));
  std::memcpy(r.logits.data(), got + logits_offset(), sizeof(float) * r.logits.size());
  return r;
}

void Decoder::save_snapshot(int32_t slot) {
  for (auto& l : parts_.layers) l.mixer->save_state(be_, slot, slot);
}

void Decoder::restore_snapshot(int32_t slot) {
  forget_draft_row(slot);
  for (auto& l : parts_.layers) l.mixer->load_state(be_, slot, slot);
}

// The prefix cache's copies follow the slots' snapshots (Mixer::save_state).
int32_t Decoder::prefix_state_copy(int32_t entry) const {
  return (limits_.state_snapshots ? limits_.max_sequences : 0) + entry;
}

void Decoder::save_prefix_state(int32_t slot, int32_t entry) {
  for (auto& l : parts_.layers) l.mixer->save_state(be_, slot, prefix_state_copy(entry));
}

void Decoder::load_prefix_state(int32_t slot, int32_t entry) {
  forget_draft_row(slot);
  for (auto& l : parts_.layers) l.mixer->load_state(be_, slot, prefix_state_copy(entry));
}

size_t Decoder::kv_block_bytes() const {
  size_t n = 0;
  for (const auto& l : parts_.layers) n += l.mixer->kv_block_bytes();
  return n;
}

size_t Decoder::prefix_state_bytes() const {
  size_t n = 0;
  for (const auto& l : parts_.layers) n += l.mixer->prefix_state_bytes();
  return n;
}

void Decoder::spill_kv_block(int32_t block, const HostBuffer& to, size_t offset) {
  for (auto& l : parts_.layers) {
    l.mixer->spill_kv_block(be_, block, to, offset);
    offset += l.mixer->kv_block_bytes();
  }
}

void Decoder::unspill_kv_block(int32_t block, const HostBuffer& from, size_t offset) {
  for (auto& l : parts_.layers) {
    l.mixer->unspill_kv_block(be_, block, from, offset);
    offset += l.mixer->kv_block_bytes();
  }
}

void Decoder::spill_prefix_state(int32_t entry, const HostBuffer& to, size_t offset) {
  for (auto& l : parts_.layers) {
    l.mixer->spill_prefix_state(be_, entry, to, offset);
    offset += l.mixer->prefix_state_bytes();
  }
}

void Decoder::unspill_prefix_state(int32_t entry, const HostBuffer& from, size_t offset) {
  for (auto& l : parts_.layers) {
    l.mixer->unspill_prefix_state(be_, entry, from, offset);
    offset += l.mixer->prefix_state_bytes();
  }
}

void Decoder::reset(int32_t slot) {
  forget_draft_row(slot);
  for (auto& l : parts_.layers) l.mixer->reset(be_, slot);
}

void Decoder::fork(int32_t src, int32_t dst) {
  for (auto& l : parts_.layers) l.mixer->fork(be_, src, dst);
  if (mtp_) fork_speculation(src, dst);
}

void Decoder::copy_kv_blocks(std::span<const KvBlockPool::Copy> copies) {
  for (const KvBlockPool::Copy& c : copies) {
    for (auto& l : parts_.layers) l.mixer->copy_kv_block(be_, c.from, c.to);
    if (mtp_) mtp_->copy_kv_block(be_, c.from, c.to);
  }
}

// Plans the largest prefill step, the largest decode step and the largest mixed step with the
// backend reserving workspace instead of launching (for each call's smaller token counts too:
// Backend::reserve_workspace_up_to), so every op a real step can issue finds its workspace
// already allocated.
void Decoder::reserve_workspace() {
  const int32_t ctx = static_cast<int32_t>(limits_.max_context);
  const int64_t T = limits_.max_tokens;
  Backend::SizingScope sizing(be_);
  run_layers(inputs_.shape_only(T, 1, static_cast<int32_t>(T), ctx));
  run_layers(inputs_.shape_only(limits_.max_sequences, limits_.max_sequences, 1, ctx));
  if (limits_.max_mixed_chunk > 1 && limits_.max_sequences > 1)
    run_layers(inputs_.mixed_shape_only(limits_.max_mixed_chunk, limits_.max_sequences - 1, ctx));
  if (mtp_) reserve_round_workspace();
  ops::linear(be_, logit_rows_, rows_of(normed_, hidden_), lm_head(), rows_of(logits_, vocab()));
  ops::argmax(be_, logit_rows_, rows_of(logits_, vocab()), static_cast<int32_t>(vocab()), nullptr, nullptr);
  ops::sample(be_, logit_rows_, rows_of(logits_, vocab()), static_cast<int32_t>(vocab()), nullptr, nullptr, nullptr);
}

} // namespace ninfer::models
