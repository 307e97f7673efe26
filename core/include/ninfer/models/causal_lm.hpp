// A causal language model (Qwen3, Qwen3.5) loaded from a Hugging Face checkpoint and run
// through a Backend: sequence slots, prompts read in chunks, and steps queued ahead of the host
// whose tokens are chosen on the backend (docs/serving.md, "The engine loop").
//
//   Backend be(plugins, host_device());
//   auto ck = Checkpoint::open(dir);
//   auto lm = CausalLM::load(ck, be, {.max_context = 4096, .max_sequences = 4});
//   auto last = lm->prefill(0, prompt_ids);              // [1, vocab] logits, on the host
//   const StepRow first{.slot = 0, .ids = std::span(&id, 1)}; // picks the next token (greedy)
//   const StepRow then{.slot = 0};                        // fed by that pick, on the backend
//   lm->queue_step(std::span(&first, 1));
//   lm->queue_step(std::span(&then, 1));
//   StepResult r = lm->next_result();                     // the first step's pick; the second runs on
//
// generation::Scheduler (ninfer/generation/scheduler.hpp) is the loop built on this surface.
// Everything is allocated at load (weights, KV cache per attention layer for max_context x
// max_sequences, GDN conv and recurrent state per slot, activations for the largest step, op
// workspace); prefill and decode never allocate device memory. Model code names op contracts
// only (ninfer/abi/ops/); the backend's planner picks the variants.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/sampling/sampling_params.hpp"
#include "ninfer/checkpoint/model_config.hpp"
#include "ninfer/runtime/device_buffer.hpp"

namespace ninfer {

class Backend;

// How weights are stored on the backend. Auto keeps F32 and BF16 tensors as they are in the
// checkpoint and widens F16 to F32 (no op takes F16). F32 widens everything (exact). BF16
// rounds F32/F16 matrices to bfloat16 (round to nearest even). Norm weights, conv weights,
// A_log, dt_bias and the small GDN gating matrices are always float32.
enum class WeightPrecision { Auto, F32, BF16 };

// Element type of the KV cache (ninfer/abi/ops/kv_append.h). Auto: float16 on a CUDA device whose
// plugin reads and writes it (the tensor-core prefill attention rounds K and V to fp16 anyway,
// and decode attention at long context is bound by the cache's bytes), float32 elsewhere (the
// CPU reference). F16 and BF16 halve the cache; Int8, Fp8 and Int4r are the compact formats of
// kv_append.h (about a quarter and an eighth of float32); a plugin that cannot take the asked
// dtype is an error at load. docs/manifest.md (`kv_dtype`) says when to choose which.
enum class KvCachePrecision { Auto, F32, F16, BF16, Int8, Fp8, Int4r };
// "auto", "float32", "float16", "bfloat16", "int8", "fp8", "int4r"
const char* to_string(KvCachePrecision p);
// The cache's ninfer_dtype: F32 (also for Auto), F16, BF16, KV_INT8, KV_FP8, KV_INT4R.
int32_t kv_cache_dtype(KvCachePrecision p);

// Speculative decoding (docs/speculative.md). Mtp: the checkpoint's multi-token-prediction head
// (mtp.*) drafts `draft_tokens` tokens per round, and one forward pass of the model verifies
// them all (CausalLM::queue_spec_round).
enum class SpecMethod { None, Mtp };
const char* to_string(SpecMethod m); // "none", "mtp"
// The drafter's LM head: the model's rows, or those rows quantized to int4 at load (a quarter of
// a 16-bit head's bytes per draft pass; drafts may differ where the head's top logits nearly
// tie, the output never does).
enum class DraftHead { LmHead, Int4 };
const char* to_string(DraftHead h); // "lm_head", "int4"
// The most drafts per round: each later draft is accepted only when every earlier one was, so
// past a handful of positions a one-layer head adds verification rows and almost no tokens.
inline constexpr int32_t kMostDraftTokens = 5;
struct Speculation {
  SpecMethod method = SpecMethod::None;
  int32_t draft_tokens = 0; // K: 1..kMostDraftTokens with Mtp, 0 without
  // The drafter's vocabulary: its argmax over token ids [0, draft_vocab) only (the LM head's
  // first rows, so nothing is copied), verification always over all of them; 0: every token.
  // A byte-level BPE vocabulary numbers its tokens in merge order, which follows how often the
  // tokenizer's training text paired them: the low ids are the common tokens
  // (docs/speculative.md, "A smaller draft vocabulary").
  int32_t draft_vocab = 0;
  // Rounds run only while at most this many sequences decode; past it every sequence decodes a
  // token per step, as without speculation (the head keeps up either way), until the batch is
  // small again. A round verifies batch x (K + 1) rows per linear, and where those rows leave the
  // decode kernels (int4 weights past 8 rows, docs/speculative.md) rounds lose to plain steps.
  // 0: no cap.
  int32_t max_batch = 0;
  DraftHead draft_head = DraftHead::LmHead;
  bool on() const { return method != SpecMethod::None; }
};

struct ModelOptions {
  // Tokens one sequence may hold; 0: what the model supports (max_position_embeddings) and the
  // memory allows at max_sequences (the memory plan, ninfer/models/memory_plan.hpp).
  int64_t max_context = 0;
  int32_t max_sequences = 1;  // sequence slots (concurrent streams)
  int32_t prefill_chunk = 512; // most tokens of one forward pass; longer prompts go in chunks
  // Most prompt tokens of a mixed step (a prompt chunk beside one-token rows of other
  // sequences, read in the same forward pass); at most prefill_chunk. 0: the cost rule of
  // ninfer/models/mixed_chunk.hpp picks it at load (options() holds the result).
  int32_t mixed_chunk = 0;
  // KV tokens of the cache, all sequences together. 0: every slot's whole max_context (which the
  // plan fits to the memory). A number: a KV block pool of that many tokens (at least one
  // max_context; past every slot's, the rest holds prefix-cache blocks), shared by the slots
  // (kv_pool_blocks, memory_plan.hpp).
  int64_t kv_capacity = 0;
  // Positions per block of the KV pool: a power of two from 32 (the CUDA attention kernels'
  // key tile) to 1024; 0: kKvBlockTokens (memory_plan.hpp). options() holds the one used.
  int32_t kv_block_tokens = 0;
  WeightPrecision weights = WeightPrecision::Auto;
  KvCachePrecision kv_cache = KvCachePrecision::Auto; // resolved by load: never Auto in options()
  // Decode steps replay CUDA graphs (one per batch size and context bucket) where the backend
  // can record them; off: every kernel is launched one by one (a diagnostic switch).
  bool cuda_graphs = true;
  // A second copy of each slot's Gated DeltaNet state, where save_snapshot() keeps the state at a
  // point (the end of a prompt) for restore_snapshot() to return to: the serving engine's prompt
  // reuse inside a slot's earlier turn (ninfer/serving/slot_reuse.hpp). Costs the state's memory
  // again; nothing on a model without Gated DeltaNet layers. Not with speculation (a snapshot does
  // not hold the MTP head's per-slot state).
  bool state_snapshots = false;
  // Copies of one sequence's Gated DeltaNet state (every recurrent layer's conv and recurrent
  // state) that the serving prefix cache keeps at KV block boundaries, so that a slot adopting
  // cached blocks of a hybrid model resumes the recurrent layers there (save_prefix_state,
  // adopt_prefix). Costs the state of one sequence each (MemoryUse::PrefixStates); nothing on a
  // model without Gated DeltaNet layers. Not with speculation.
  int32_t prefix_states = 0;
  // Off: the MTP head, if the checkpoint has one, is not loaded. Mtp: it is loaded (load fails
  // naming the problem when the checkpoint has none), and every step also runs it, so that its
  // KV cache follows the sequence (docs/speculative.md, "The MTP head's own state").
  Speculation speculation;
};

enum class LogitsFor { Last, All };

// One sequence's token choice on the backend (the sample op, ninfer/abi/ops/sample.h): the
// host sampler's temperature / top-k / top-p / min-p, and draw number `draw` of the stream
// `seed` (draw k of a sequence is the k-th random draw its Sampler would make).
struct RowSampling {
  double temperature = 1.0; // 0: greedy
  int32_t top_k = 0;        // 0: off
  double top_p = 1.0;       // 1: off
  double min_p = 0.0;       // 0: off
  uint64_t seed = 0;
  uint64_t draw = 0;
};

// The device pick of a request's settings `p` (its temperature and filters; penalties and top
// logprobs are the host's), drawing from stream `seed` at draw number `draw`.
RowSampling row_sampling(const SamplingParams& p, uint64_t seed, uint64_t draw);

// One sequence's part of a queued step.
struct StepRow {
  int32_t slot = 0;
  // The tokens appended to the slot: one for a decode row, or a prompt chunk: at most
  // prefill_chunk tokens when the row is its step's only one, at most mixed_chunk as the first
  // row of a step whose other rows take one token each (a mixed step). Empty: one token, the one
  // the slot's last queued pick chose, copied on the backend (the host need not have read it).
  std::span<const int32_t> ids;
  // Choose the token after the row's last one: on the backend under `sampling` (temperature 0:
  // greedy, the argmax op's choice) and, with `logits`, also bring that position's logits row
  // to the host, for a sampler the backend lacks (penalties, top logprobs). false: no pick (a
  // prompt chunk that is not the last).
  bool pick = true;
  RowSampling sampling{.temperature = 0};
  bool logits = false;
};

// One sequence of a speculative round (CausalLM::queue_spec_round).
struct SpecRow {
  int32_t slot = 0;
  // The slot's next input. Absent: the pick its last step or round left on the backend (the
  // host need not have read it).
  std::optional<int32_t> id;
  // The model's pick after each verified row: greedy (temperature 0), or the sample op under
  // these settings with draw numbers draw, draw + 1, ... for rows 0 .. draft_tokens. A draft is
  // kept while it equals the pick: accepting a greedy draft x with probability p(x) and else
  // taking a token from p without x, which is speculative sampling for a point-mass draft, and
  // draws the very tokens sampled decode draws with the same numbers (a row gains accepted + 1
  // tokens, so it uses accepted + 1 draws).
  RowSampling sampling{.temperature = 0};
  // Benchmarks only (ninfer-bench --spec-acceptance): the round keeps this many drafts
  // (0..draft_tokens) whatever the verification found, so the engine's cost is measured at a
  // chosen acceptance rate; the tokens such a round reports mean nothing. Every row of a round
  // forces its count, or none does.
  std::optional<int32_t> forced_accept;
};

// What the host reads of one queued step.
struct StepResult {
  // Per picked row, in row order: the chosen id (-1: the row held NaN or +inf, or only -inf) and
  // its raw log-probability (log_softmax of the logits). A speculative round: draft_tokens + 1
  // per row, of which the row's first accepted[i] + 1 are its new tokens.
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  // [rows with `logits`, vocab], in row order.
  std::vector<float> logits;
  // A speculative round only: per row, how many of its drafts the model accepted.
  std::vector<int32_t> accepted;
};

struct MemoryPlan; // ninfer/models/memory_plan.hpp

namespace models {
class Decoder; // core/models: the layers, activations and ops of one forward pass
struct PickRef; // core/models/decoder.hpp: where a queued pick's id stays on the backend
}

class CausalLM {
 public:
  // Checks every tensor against config.json first (one error lists all problems), plans the
  // memory (a max_context of 0 becomes what the model supports and the memory allows) and
  // refuses, naming the parts and what fits, a plan beyond the backend's memory limit or its
  // device's free memory; then uploads the weights and allocates all memory. Throws
  // ninfer::Error on a problem.
  static std::unique_ptr<CausalLM> load(const Checkpoint& checkpoint, Backend& backend,
                                        const ModelOptions& options = {});
  ~CausalLM();
  CausalLM(const CausalLM&) = delete;
  CausalLM& operator=(const CausalLM&) = delete;

  const ModelConfig& config() const { return config_; }
  const ModelOptions& options() const { return options_; } // resolved (max_context filled in)
  // The plan the load was made by (its parts, what fits, the budget).
  const MemoryPlan& memory_plan() const { return *plan_; }
  int64_t vocab_size() const { return config_.vocab_size; }

  // Whether decode steps replay CUDA graphs now (options().cuda_graphs, unless a recording
  // failed and the model fell back to eager launches), and how many graphs it has recorded.
  bool decode_graphs_active() const;
  size_t decode_graphs_recorded() const;

  // Tokens slot `slot` holds (its next position).
  int64_t position(int32_t slot) const;

  // The paged KV cache (docs/memory.md, "The KV block pool"): one pool of blocks of
  // kv_block_tokens() positions, shared by the slots; a slot holds the blocks of the positions
  // its sequence has reached. A block may be held by several slots (fork: a common prefix) and
  // is free once none holds it. A slot never writes into a block another slot holds: a write
  // that starts inside one (after truncate, restore_snapshot or assume_context) first gives the
  // slot a private copy of it (copy-on-write, a device copy of its rows in every attention
  // layer). prefill, queue_step and queue_spec_round take the blocks their positions lack and
  // those copies from the free blocks before they queue anything, and refuse (ninfer::Error with
  // the numbers, the model unchanged) when there are not enough. A slot keeps its blocks until
  // release_kv (a retired sequence's rows stay for prompt reuse until then).
  int32_t kv_block_tokens() const;
  int64_t kv_blocks_total() const;
  int64_t kv_blocks_free() const;
  // Blocks in the slot's row of the table, shared ones included; of them, the ones another slot
  // also holds.
  int64_t kv_blocks_held(int32_t slot) const;
  int64_t kv_blocks_shared(int32_t slot) const;
  // Blocks a sequence of `positions` positions holds.
  int64_t kv_blocks_for(int64_t positions) const;
  // Gives the slot every block it writes up to `positions` now (an admission's reservation): the
  // blocks of positions [0, positions) it lacks, and a private copy of each shared block where
  // its next write lands. Later steps up to `positions` then take nothing. false, with nothing
  // changed, when the free blocks do not suffice or positions > max_context.
  bool reserve_kv(int32_t slot, int64_t positions);
  // The admission arithmetic of reserve_kv: were the slot to keep only its first `keep`
  // positions (truncate, restore_snapshot; trim_kv) and the slots in `released` to give back
  // their blocks (release_kv), the blocks reserve_kv(slot, positions) would take, and the blocks
  // then free. Exact with shared blocks: a released slot frees only the blocks no other slot
  // keeps, and a kept block where the slot writes costs a copy while another slot keeps it.
  // `evictable`: blocks then held by the prefix cache alone (kv_hold_block), which it can give back
  // (kv_unhold_block) for the reservation. `adopt` not empty: the slot instead holds those blocks
  // as adopt_prefix gives them (`keep` is ignored).
  struct KvOutlook {
    int64_t take = 0, free = 0, evictable = 0;
    bool fits() const { return take <= free + evictable; }
  };
  KvOutlook kv_outlook(int32_t slot, int64_t keep, int64_t positions, std::span<const int32_t> released = {},
                       std::span<const int32_t> adopt = {}) const;
  // The blocks of the slot's row, in position order (kv_blocks_held of them).
  std::span<const int32_t> kv_block_row(int32_t slot) const;
  // The prefix cache's hold on a block (ninfer/serving/prefix_cache.hpp): one more holder that is no
  // slot, so a block some slot holds keeps its rows after that slot drops it, and a slot about to
  // write into it copies it first. kv_unhold_block drops the hold (the block is free once no slot
  // holds it). Throws ninfer::Error for a free block or a hold twice / none to drop.
  void kv_hold_block(int32_t block);
  void kv_unhold_block(int32_t block);
  // Slots holding the block, plus one when the cache holds it.
  int32_t kv_block_holders(int32_t block) const;
  // Blocks held by the cache alone.
  int64_t kv_blocks_evictable() const;
  // Forgets the slot's sequence (reset) and returns its blocks to the pool.
  void release_kv(int32_t slot);
  // Returns the slot's blocks past its position (rows it no longer reads: a truncated or restored
  // sequence's tail) to the pool; the sequence is unchanged.
  void trim_kv(int32_t slot);
  // Forgets the slot's sequence: position 0, GDN state zeroed.
  void reset(int32_t slot);
  // Whether truncate() can roll a slot back: only a model without Gated DeltaNet layers, whose
  // whole state per token is its KV rows (a recurrent state cannot be rewound), loaded without
  // speculation (which keeps each slot's last hidden state).
  bool can_truncate() const;
  // Keeps the first `tokens` of the slot's sequence (at most position()); the next prefill or
  // decode continues from there, overwriting the KV rows after it. Throws ninfer::Error when
  // !can_truncate() or `tokens` is beyond the slot's position.
  void truncate(int32_t slot, int64_t tokens);
  // With options().state_snapshots: keeps the slot's recurrent state and position, queued after
  // the steps queued so far; restore_snapshot() returns the slot to them (the KV rows after are
  // overwritten as truncate() does). A snapshot lasts until reset(), a truncate() below it or a
  // failed prefill. snapshot_position() is its position, -1 without one. Throws ninfer::Error
  // without state_snapshots, or restoring without a snapshot.
  void save_snapshot(int32_t slot);
  void restore_snapshot(int32_t slot);
  int64_t snapshot_position(int32_t slot) const;
  // Slot `dst` becomes an exact copy of slot `src`'s sequence: decoding it afterwards gives what
  // decoding `src` would. It shares src's KV blocks, except that dst gets its own copy at once
  // of the blocks both slots write next (the one the sequence ends inside and, with speculation,
  // the one where the MTP head writes its row of the last position), so src's blocks stay as
  // private as they were and neither slot's next step copies anything. It gets a copy of every
  // Gated DeltaNet layer's state (and snapshot), src's position and snapshot position, its last
  // queued pick (a chained row of dst takes it) and, with speculation, its last hidden state and
  // next input. dst's own blocks past src's position stay dst's (a reservation holds); its
  // earlier sequence is forgotten. Device copies, queued after the steps queued so far, so src's
  // unread step is fine (its position is known when it is queued). Throws ninfer::Error, the
  // model unchanged, for src == dst, a bad slot, a src that holds no tokens, a round of either
  // slot not read (its position is not known), or too few free blocks for the copies.
  void fork(int32_t src, int32_t dst);
  // The slot forgets its sequence (reset, release_kv) and holds `blocks` as its first blocks,
  // each held already (by the prefix cache or another slot), at position blocks.size() x
  // kv_block_tokens(): the KV rows of a prefix another slot computed, shared as fork shares them
  // (copy-on-write protects them). Throws ninfer::Error, the model unchanged, otherwise, for a free block, a prefix
  // past max_context, or a round of the slot not read.
  // A model with Gated DeltaNet layers adopts with `state`, a prefix-state copy saved where the
  // blocks end (save_prefix_state): the slot's recurrent layers resume from it.
  void adopt_prefix(int32_t slot, std::span<const int32_t> blocks, int32_t state = -1);
  // The prefix cache's state copies this load has (options().prefix_states where the model has
  // Gated DeltaNet layers, else 0), and the slot's present state into copy `entry`, queued after
  // the steps queued so far (so it is the state after them). Throws ninfer::Error for a bad slot
  // or entry, or a round of the slot not read.
  int32_t prefix_states() const;
  void save_prefix_state(int32_t slot, int32_t entry);
  // The prefix cache's host tier (ninfer-serve --host-cache-gib): the bytes of one KV block over
  // every attention layer and of one prefix-state copy; host memory for them (page-locked on a
  // CUDA device); copies of a block (one the cache alone holds) or of prefix-state copy `entry`
  // into host memory at `offset` and back, queued after the steps queued so far, the host not
  // waiting. kv_take_block_for_cache: a free block only the cache holds (for a restore), -1 when
  // none is free. Throws ninfer::Error for a bad block or entry.
  size_t kv_block_bytes() const;
  size_t prefix_state_bytes() const;
  HostBuffer allocate_host(size_t bytes, std::string_view what);
  void spill_kv_block(int32_t block, const HostBuffer& to, size_t offset);
  void unspill_kv_block(int32_t block, const HostBuffer& from, size_t offset);
  void spill_prefix_state(int32_t entry, const HostBuffer& to, size_t offset);
  void unspill_prefix_state(int32_t entry, const HostBuffer& from, size_t offset);
  int32_t kv_take_block_for_cache();
  // Waits for every step and copy queued so far.
  void synchronize();
  // Benchmarks only: the slot continues at position `tokens` as if that many had been
  // prefilled, without computing them. Decode then reads `tokens` KV rows per attention layer
  // (zeros, or what an earlier sequence left), so its cost is that of a real context that deep.
  void assume_context(int32_t slot, int64_t tokens);

  // Appends `ids` to the slot's sequence (in chunks of prefill_chunk) and returns logits
  // row-major: [ids.size(), vocab] for All, [1, vocab] (after the last id) for Last, waiting for
  // them (what prompt logprobs need; a generation loop queues its chunks with queue_step).
  // Throws ninfer::Error for an empty prompt, an id outside the vocabulary, a bad slot, or a
  // prompt that does not fit in max_context; the slot is then unchanged.
  std::vector<float> prefill(int32_t slot, std::span<const int32_t> ids, LogitsFor which = LogitsFor::Last);

  // Queues one forward pass and returns at once: one-token rows of distinct slots (a decode
  // step), one prompt chunk, or a prompt chunk followed by one-token rows (a mixed step: the
  // weights are read once for both; its picked rows are the chunk's last token and the
  // one-token rows). Positions advance now. Rows may change from step to step
  // (sequences join and leave): a row with empty `ids` takes the token its slot's last queued
  // pick chose, wherever that pick's row was, and the copy happens on the backend. A step with
  // picked rows has a result, read with next_result; at most kMostUnreadResults are unread at
  // once. A step queued after the token that ends a sequence still runs and advances its slot
  // (GDN state included): reset() the slot before reusing it. Throws ninfer::Error (the model
  // unchanged) for a bad slot, a slot twice, ids outside the vocabulary, a row beyond
  // max_context, a chained row whose slot has no pick on the backend (none since its last reset
  // or prefill, or its pick's result slot has since been given to a newer step), too many
  // rows, a prompt chunk that is not the first row or is longer than its limit, or results left
  // unread. A step picks all its rows or none: a row without `pick` beside picking rows gets a
  // greedy pick nobody need read.
  static constexpr size_t kMostUnreadResults = 4;
  void queue_step(std::span<const StepRow> rows);
  // Backend::set_host_tally of the model's backend (the scheduler's -v log of a prompt chunk).
  void set_host_tally(std::map<std::string, double, std::less<>>* tally);
  // Speculative decoding (options().speculation on): queues one round for each row's slot
  // (docs/speculative.md). The MTP head drafts draft_tokens tokens after the slot's next input,
  // one forward pass verifies the input and the drafts, the model's own greedy pick after each
  // keeps the longest agreeing prefix, and every slot is settled on the backend at the position
  // it accepted; nothing waits for the host. Its result (next_result) has draft_tokens + 1 picks
  // per row and the accepted counts; a row gains accepted + 1 tokens (the accepted drafts and the
  // model's own next token, its next input), and its position advances when the result is read:
  // a slot's next step or round comes after that. Rows pick greedily or sample (SpecRow::sampling).
  // Throws ninfer::Error (the model
  // unchanged) without speculation, for a bad slot, a slot twice, a slot whose last round is not
  // read, one with no next input (neither given nor picked), an id outside the vocabulary, a
  // slot without draft_tokens + 1 positions left in max_context, or results left unread.
  void queue_spec_round(std::span<const SpecRow> rows);
  // Benchmarks only (ninfer-bench --spec-verify-only): later rounds run their verification pass
  // alone, with no MTP head pass (the drafts verified are whatever the last drafting round left),
  // so a round's time is the verification's; the tokens are still the model's own picks.
  void set_verify_only_rounds(bool on) { verify_only_rounds_ = on; }

  // Logits of tokens [first, first + count) of the step queued last, row-major [count, vocab],
  // waiting for them: a prompt chunk's rows for prompt logprobs, read in whatever step carried
  // it. Call before queueing another step.
  std::vector<float> last_step_logits(int64_t first, int64_t count);
  // Speculation only: the MTP head's logits for tokens [first, first + count) of the step queued
  // last (a prompt chunk, prefill's last chunk, a decode step), row-major [count, vocab],
  // waiting for them. The head's row for a token at position p pairs it with the model's hidden
  // state at p - 1, so it predicts what the model's own logits row of that token predicts (the
  // token at p + 1): the head's first draft there. A token at position 0 has none. Call before
  // queueing another step.
  std::vector<float> last_step_draft_logits(int64_t first, int64_t count);
  // Waits for the oldest queued step whose result was not read and returns it.
  StepResult next_result();
  size_t unread_results() const;
  // Forgets the results not read yet (their steps still run; their picks still feed chained
  // rows). A slot whose round is forgotten has an unknown position: reset it.
  void drop_results();

 private:
  CausalLM(ModelConfig config, ModelOptions options, Backend& backend, std::unique_ptr<models::Decoder> decoder,
           std::unique_ptr<MemoryPlan> plan);
  void check_slot(int32_t slot) const;
  void check_ids(std::span<const int32_t> ids) const;
  // Refuses a slot whose speculative round is not read (its position is not known yet).
  void check_no_round(int32_t slot) const;
  // Refuses rows [first, first + count) that the last step did not hold (`what` names the ask).
  void check_last_step_rows(int64_t first, int64_t count, const char* what) const;
  // queue_step's checks of a step's rows (nothing changes before they pass).
  void check_rows(std::span<const StepRow> rows) const;
  // The first position a slot at `position` writes next: with speculation the MTP head writes
  // its row of the position before (it pairs the next token with that position's hidden state).
  int64_t kv_write_start(int64_t position) const;
  // Positions [from, to) a slot is about to write.
  struct KvWrite {
    int32_t slot = 0;
    int64_t from = 0, to = 0;
  };
  // The write of `slot` from its position (kv_write_start) up to `to`.
  KvWrite kv_write(int32_t slot, int64_t to) const;
  // Takes the KV blocks the writes lack and makes private the shared blocks where they write (the
  // rows copied on the backend), all or none, and uploads the table; throws ninfer::Error naming
  // the shortfall when the free blocks do not suffice.
  void take_kv_blocks(std::span<const KvWrite> writes);

  ModelConfig config_;
  ModelOptions options_;
  Backend& backend_;
  std::unique_ptr<models::Decoder> decoder_;
  std::unique_ptr<MemoryPlan> plan_;
  std::vector<int64_t> positions_;
  std::vector<int64_t> snapshots_; // per slot: the position of its snapshot, -1 for none
  // Per slot: where its last queued pick stays on the backend (a chained row's input), if any.
  std::vector<std::unique_ptr<models::PickRef>> last_pick_;
  // Speculation: per slot, whether the backend holds its next input (its last picking step or
  // round left it), whether a round of it is unread (its position is known once read), and a
  // count of resets, so a round read after its slot was reset changes nothing.
  std::vector<bool> next_on_backend_, round_unread_;
  bool verify_only_rounds_ = false;
  std::vector<uint64_t> generation_;
  // Per queued step with a result, oldest first: a round's slots and their generations (empty
  // for other steps).
  struct PendingRound {
    std::vector<int32_t> slots;
    std::vector<uint64_t> generations;
  };
  std::deque<PendingRound> pending_rounds_;
  int64_t last_step_tokens_ = 0; // tokens of the step queued last (last_step_logits)
};

} // namespace ninfer
