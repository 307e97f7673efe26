// The forward pass shared by every family: embedding, decoder layers (norm, token mixer, norm,
// MLP; each block's norm is folded into its first projection and its last projection adds to
// the residual stream), final norm, LM head. Owns the activation
// buffers (sized once for StepLimits) and the step inputs.
#pragma once

#include <array>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "block.hpp"
#include "kv_block_pool.hpp"
#include "decoder_layer.hpp"
#include "mlp_block.hpp"
#include "ninfer/abi/ops/sample.h"
#include "ninfer/checkpoint/model_config.hpp"
#include "step_inputs.hpp"
#include "weights.hpp"

namespace ninfer::models {

class MtpHead;

// The token choice a step makes for its picked rows right after its layers, in the same launch
// sequence (one recording with them; the copies of the ids to the host follow it): Greedy is the
// argmax op, Sample the sample op under the rows set by set_sample_rows.
enum class Pick { None, Greedy, Sample };

// Where one picked id stays on the backend after its step, so a later step can take it as an
// input without the host reading it: row `row` of result slot `slot`, valid while that slot has
// not been given to a newer step (`use` counts the slot's steps).
struct PickRef {
  size_t slot = 0;
  int64_t row = 0;
  uint64_t use = 0;
};

// A step's input id copied from an earlier pick: the step's token `token`.
struct ChainedId {
  int64_t token = 0;
  PickRef from;
};

// What a step picks and brings back: rows [first, first + rows) of its tokens (a decode step:
// all of them; a prompt chunk: its last), and of those the ones whose logits rows go to the host
// too (ascending indices into the picked rows).
struct StepPicks {
  Pick pick = Pick::None;
  int64_t first = 0, rows = 0;
  std::span<const int64_t> logits_rows;
};

// A step's result as the host reads it: ids and log-probabilities per picked row, logits rows
// [logits_rows, vocab] in the order they were asked for. A speculative round's: draft_tokens + 1
// picks per sequence (its verification rows) and, per sequence, the drafts it accepted.
struct PickResult {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  std::vector<float> logits;
  std::vector<int32_t> accepted;
};

// One sequence of a speculative round: its slot and the position of its next input (the first
// position the round writes).
struct RoundRow {
  int32_t slot = 0;
  int64_t position = 0;
};

// What a family supplies: its layers and top-level weights.
struct DecoderParts {
  Matrix embedding;
  std::vector<Layer> layers;
  Vector final_norm;
  Matrix lm_head;            // empty when tied to the embedding
  ops::NormScale norm_scale; // of the layer and final norms
  float eps = 1e-6f;
};

class Decoder {
 public:
  // Allocates activations for `limits`, then sizes every op's workspace by planning the largest
  // prefill and decode steps (and, with an MTP head, the largest speculative round).
  // limits.kv_pool is `kv_pool`, which the decoder keeps.
  Decoder(Backend& be, DecoderParts parts, const StepLimits& limits, std::unique_ptr<KvBlockPool> kv_pool,
          std::unique_ptr<MtpHead> mtp = nullptr);
  ~Decoder();

  const StepLimits& limits() const { return limits_; }
  // The KV blocks every attention layer's cache is laid out over (their table is uploaded by
  // KvBlockPool::sync before the steps that read it).
  KvBlockPool& kv_pool() { return *kv_pool_; }
  const KvBlockPool& kv_pool() const { return *kv_pool_; }
  // With an MTP head (speculative decoding, docs/speculative.md) every step also runs the head
  // over its tokens, one position behind the model, so the head's KV cache and each slot's
  // last hidden state follow the sequence; a step with picks also keeps each slot's pick as the
  // slot's next input for spec_round.
  bool speculative() const { return mtp_ != nullptr; }
  int64_t vocab() const { return lm_head().rows; }
  // Token ids [0, draft_vocab()) are what the MTP head may draft (Speculation::draft_vocab).
  int64_t draft_vocab() const { return limits_.draft_vocab > 0 ? limits_.draft_vocab : vocab(); }

  // Uploads the step, copies its `chained` ids from earlier picks (on the backend, before the
  // layers and outside any recording), runs every layer and the final norm; the hidden rows stay
  // on the backend. A decode step (one token per sequence) plans attention for its context
  // bucket and, with recording on, replays the recording of its DecodeShape instead of launching
  // op by op. With `picks`, its picked rows are chosen and their ids, log-probabilities and the
  // logits rows asked for start back to the host without the host waiting: read_picks returns
  // them, oldest first. At most kMostPendingPicks steps' picks are unread at once. The returned
  // slot is where the picks stay on the backend (PickRef).
  static constexpr size_t kMostPendingPicks = MemorySpace::kResultSlots;
  struct Queued {
    Step step;
    size_t slot = 0;  // the picks' result slot (when picks.pick != None)
    uint64_t use = 0; // that slot's use (PickRef::use)
  };
  Queued forward(std::span<const SequenceChunk> chunks, std::span<const ChainedId> chained = {},
                 const StepPicks& picks = {});
  // Whether `ref` still names a pick on the backend (its slot was not given to a newer step).
  bool pick_alive(const PickRef& ref) const;
  // A speculative round (speculative() only): for each row, the head drafts limits().draft_tokens
  // tokens after the slot's next input (its last pick, or set_next_input's), one pass verifies the
  // input and the drafts, draft_accept keeps the longest agreeing prefix, and every slot is
  // settled on the device at the position it accepted (recurrent states, last hidden state, next
  // input; KV rows beyond are never read). The host reads the picks (draft_tokens + 1 per row)
  // and the accepted counts with read_picks; a row gains accepted + 1 tokens. Rows' positions
  // must hold the round's draft_tokens + 1 tokens. Decode recordings serve rounds too, one per
  // (rows, context bucket, drafts).
  // `pick`: Greedy (argmax) or Sample (the sample op under set_sample_rows' rows, one per
  // verification row) for the verified rows; the drafts are always the head's argmax.
  // `forced`, when not empty (benchmarks only: ninfer-bench --spec-acceptance): row i's accepted
  // count is forced[i] (0..draft_tokens) whatever the drafts were, so a round's cost can be
  // measured at a chosen acceptance rate; the tokens it reports then mean nothing.
  // `verify_only` (benchmarks only: ninfer-bench --spec-verify-only): the round runs no MTP head
  // pass, neither its drafts (the verification reads whatever drafts the table holds) nor the
  // head's catch-up, so its cost is the verification pass's; its output is still the model's.
  Queued spec_round(std::span<const RoundRow> rows, Pick pick = Pick::Greedy, std::span<const int32_t> forced = {},
                    bool verify_only = false);
  // The slot's next input for spec_round, given by the host.
  void set_next_input(int32_t slot, int32_t id);
  // The sampling rows the next Pick::Sample step uses, row i for its picked row i.
  void set_sample_rows(std::span<const ninfer_sample_row> rows);
  size_t pending_picks() const { return pending_.size(); }
  // Waits for the oldest unread step's picks and returns them.
  PickResult read_picks();
  // Forgets the unread picks (their steps still run; their picks stay usable as PickRefs).
  void drop_picks() { pending_.clear(); }
  // Most logits rows one step brings back (a decode step's rows).
  int64_t most_logits_rows() const { return limits_.max_sequences; }
  // Decode steps replay recordings (CUDA graphs) when `on` and the backend can record.
  void set_decode_recording(bool on) { record_decode_ = on && be_.can_record(); }
  bool decode_recording() const { return record_decode_; }
  size_t decode_recordings() const;
  // Logits of rows [first, first + count) of the last forward pass, appended to `out`.
  void logits(int64_t first, int64_t count, std::vector<float>& out);
  // Speculation only: the MTP head's logits for the last step's tokens [first, first + count),
  // appended to `out`; a token at position 0 has no head row (an error).
  void draft_logits(int64_t first, int64_t count, std::vector<float>& out);
  void reset(int32_t slot);
  // Every mixer's state of the slot to its snapshot and back (StepLimits::state_snapshots).
  void save_snapshot(int32_t slot);
  void restore_snapshot(int32_t slot);
  // Every mixer's state of the slot to the prefix cache's copy `entry` and back
  // (StepLimits::prefix_states).
  void save_prefix_state(int32_t slot, int32_t entry);
  void load_prefix_state(int32_t slot, int32_t entry);
  // The prefix cache's host tier over every layer (Mixer::kv_block_bytes and the rest): one
  // block's rows, or one prefix-state copy, laid out layer after layer at `offset`.
  size_t kv_block_bytes() const;
  size_t prefix_state_bytes() const;
  void spill_kv_block(int32_t block, const HostBuffer& to, size_t offset);
  void unspill_kv_block(int32_t block, const HostBuffer& from, size_t offset);
  void spill_prefix_state(int32_t entry, const HostBuffer& to, size_t offset);
  void unspill_prefix_state(int32_t entry, const HostBuffer& from, size_t offset);
  // Slot `dst` takes a copy of slot `src`'s state, queued after the steps queued so far: every
  // recurrent layer's state (and snapshot) and, with speculation, the slot's last hidden state
  // and next input. KV rows are the pool's (KvBlockPool::share, copy_kv_blocks).
  void fork(int32_t src, int32_t dst);
  // The rows of each copy's source block into its target block, in every attention layer (the
  // MTP head's included), queued in stream order.
  void copy_kv_blocks(std::span<const KvBlockPool::Copy> copies);

 private:
  int32_t prefix_state_copy(int32_t entry) const;
  // The LM head, then `pick` for rows [first, first + n) into picks_.
  void run_pick(int64_t first, int64_t n, Pick pick);
  // Copies the chained ids into the step's inputs, one copy per run of consecutive tokens fed by
  // consecutive rows of one pick.
  void copy_chained(std::span<const ChainedId> chained);
  // Keeps picks_ (n rows) in the next result slot on the backend and starts it, with the logits
  // rows asked for (and a round's `accepted` counts after the picks), back to the host.
  void send_picks(int64_t n, std::span<const int64_t> logits_rows, Queued& q, int64_t accepted = 0);

  // The MTP pass of a step (speculative decoding): the head over the step's tokens, each paired
  // with the hidden state of the position before it (decoder_speculation.cpp).
  struct MtpPass {
    Step step;                  // the head's rows: the step's tokens less those at position 0
    const int32_t* from = nullptr; // per head row, the step's token it reads
    const int32_t *step_dst = nullptr, *step_src = nullptr; // hidden rows from this step's
    const int32_t *slot_dst = nullptr, *slot_src = nullptr; // hidden rows from a slot's last
    int64_t from_step = 0, from_slot = 0;
    const int32_t* last = nullptr; // per sequence, its last token in the step
  };
  // Uploads the pass's rows and index arrays (before the step's launches).
  MtpPass prepare_mtp_pass(std::span<const SequenceChunk> chunks, const Step& s);
  // The pass's launches, after the step's layers and pick.
  void run_mtp_pass(const Step& s, const MtpPass& m, bool picked);
  // The launches of a speculative round over the verification step `v` (its draft passes'
  // positions at `draft_pos`, draft_tokens x rows; `to_verify` places the drafts in v's ids).
  struct RoundKind {
    bool forced = false, verify_only = false, chained = false;
  };
  void run_round(const Step& v, const int32_t* draft_pos, const int32_t* to_verify, Pick pick, RoundKind kind);
  // Int32 arrays of the next step, packed for one upload before its launches; the same sizes in
  // the same order give the same addresses, as a recording needs.
  const int32_t* add_index(std::span<const int32_t> values);
  void upload_indices();
  int32_t* device_ids(const Step& s) const; // the step's ids, which its launches may rewrite
  // Where a result slot's logits rows start (after the largest pick and a round's accepted
  // counts, cache-line aligned).
  size_t logits_offset() const {
    return (sizeof(int32_t) * static_cast<size_t>(2 * logit_rows_ + limits_.max_sequences) + 63) / 64 * 64;
  }
  const Matrix& lm_head() const { return parts_.lm_head.buf.empty() ? parts_.embedding : parts_.lm_head; }
  void run_layers(const Step& s);
  void reserve_workspace();
  // The speculation buffers (decoder_speculation.cpp) and the planning of a round's ops.
  void allocate_speculation();
  // fork()'s part of the speculation state: the slot's last hidden state, next input and first
  // draft row.
  void fork_speculation(int32_t src, int32_t dst);
  // The slot's first draft row no longer follows its next input (anything but a round moved it).
  void forget_draft_row(int32_t slot) {
    if (!draft_row_ready_.empty()) draft_row_ready_[static_cast<size_t>(slot)] = 0;
  }
  void reserve_round_workspace();
  // After a round's verification pass: slot slots[i] takes the recurrent layers' states after
  // the pass's token rows[i], for i < seqs (backend arrays; the round's acceptance writes rows).
  void keep_token_states(int32_t seqs, const int32_t* slots, const int32_t* rows);
  // Logits of the drafter's vocabulary for `rows` head rows.
  void draft_lm_head(int64_t rows, ops::Rows x, ops::Rows logits);
  // The span a decode step's attention is planned for: the next power of two >= kv_len (at
  // least kMinDecodeBucket, at most max_context). Eager and recorded steps use the same plans,
  // so they compute the same bits, and one recording serves every length in its bucket.
  int32_t decode_bucket(int32_t kv_len) const;
  // What a decode step's recording depends on: (sequences, context bucket, pick, drafts of a
  // speculative round or 0, rows of the step's MTP pass). Everything else a step varies (ids,
  // chained ids, sampling rows, positions, the accepted drafts) is device data written before
  // it or by its own launches.
  // (tokens, context bucket, pick, drafts, last, chunk, picked): a step's last is its MTP pass's
  // tokens, a round's 1 when its accepted counts are forced, plus 2 when it verifies only, plus 4
  // when it is chained (its first drafts come from the last round's catch-up); a mixed step's
  // chunk is its prompt chunk's tokens and picked its picked rows (first << 32 | rows), 0 for
  // the other steps.
  using DecodeShape = std::tuple<int64_t, int32_t, Pick, int32_t, int64_t, int64_t, int64_t>;
  void run_decode_step(const DecodeShape& shape, const std::function<void()>& launch);

  Backend& be_;
  DecoderParts parts_;
  StepLimits limits_;
  std::unique_ptr<KvBlockPool> kv_pool_;
  StepInputs inputs_;
  std::unique_ptr<MtpHead> mtp_;
  // Speculation only: the MTP pass's step inputs; per slot, the model's final-norm hidden state
  // at its last position and its next input; the draft table [draft_tokens + 1][sequences] (a
  // round's inputs, then its drafts); the head's rows; each round sequence's kept row.
  std::unique_ptr<StepInputs> mtp_inputs_;
  // forced_accepts_: a round's forced accepted counts, then its kept rows (spec_round's `forced`).
  DeviceBuffer slot_hidden_, next_ids_, draft_ids_, mtp_rows_, keep_rows_, forced_accepts_;
  // Per slot, the head's output row for its next input at its last position: a round's catch-up
  // computes it at the kept row, exactly what the next round's first draft pass would, so that
  // round starts from it (a "chained" round) and runs one head pass fewer. draft_row_ready_
  // (host) says where it still follows the slot; any step but a round, a reset, a restore or a
  // new next input clears it.
  DeviceBuffer slot_draft_row_;
  std::vector<uint8_t> draft_row_ready_;
  // The drafter's LM head rows in int4 (StepLimits::int4_draft_head), else empty: the LM head's.
  Matrix draft_head_;
  DeviceBuffer indices_;
  std::vector<int32_t> host_indices_;
  // Every layer's kept states of one kind (Mixer::KeptState, grouped by width), settled in one
  // copy a round: a launch per layer would cost more than its few MB take to copy. `bases` is
  // the backend's array of the slots' base pointers, then the tokens'.
  struct KeptStates {
    int64_t words = 0;
    std::vector<void*> slots;
    std::vector<const void*> tokens;
    DeviceBuffer bases;
  };
  std::vector<KeptStates> kept_states_;
  std::vector<int32_t> mtp_row_of_token_; // the last step's: its head row per token, -1 for none
  ScratchNeeds needs_;
  int64_t hidden_;
  int64_t logit_rows_; // rows of the logits buffer; the LM head runs in slices of this many
  DeviceBuffer residual_, normed_, proj_, inner_, core_, gates_, logits_;
  // Per pick of n rows: n token ids, then n log-probabilities (run_pick; the recordings write
  // here). kept_picks_ holds each result slot's copy, what chained ids are read from.
  DeviceBuffer picks_, kept_picks_;
  struct PendingPick {
    size_t slot; // the backend's result slot
    int64_t rows;
    int64_t logits_rows;
    int64_t accepted; // a speculative round's sequences (their accepted counts follow the picks)
  };
  std::deque<PendingPick> pending_;
  size_t next_result_slot_ = 0;
  std::array<uint64_t, kMostPendingPicks> slot_uses_{};
  std::array<int64_t, kMostPendingPicks> slot_rows_{}; // rows of each slot's kept pick
  DeviceBuffer sample_params_;                 // logit_rows_ ninfer_sample_row
  Scratch scratch_;
  bool record_decode_ = false;
  // Decode shapes seen: null until the shape's second step records it.
  std::map<DecodeShape, std::shared_ptr<const Backend::Recording>> recordings_;
};

} // namespace ninfer::models
