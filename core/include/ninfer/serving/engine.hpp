// The server's inference engine: one CausalLM with max_sequences slots and one thread driving
// the engine loop (ninfer/generation/scheduler.hpp, the loop ninfer-run drives too). Requests
// wait in a bounded queue, in order, and take a free slot once the KV block pool can give it the
// blocks of every position the request may reach (retired slots' rows kept for prompt reuse are
// given back for it, least recently retired first, then the prefix cache's least recently used
// blocks); a prompt that begins with blocks the prefix cache holds (ninfer/serving/prefix_cache.hpp)
// shares them and reads only the rest. They are prefilled one chunk per iteration (inside the
// decoding sequences' step while there are any: ModelOptions::mixed_chunk tokens, else
// prefill_chunk), and then decode together: every step feeds one token to each generating
// sequence, queued before the host reads the previous step's tokens. Requests join between
// steps; a finished or cancelled one frees its slot at once. The choices of one request (`n`)
// read their prompt once: the first reads it, the others that find a slot while it does become
// copies of it right after the prompt (Scheduler::add_fork, CausalLM::fork).
//
//   Engine engine(*lm, &tokenizer, {.max_pending = 64});
//   auto h = engine.submit(request);   // throws QueueFull / PromptTooLong / TooManyChoices / Error
//   while (auto piece = h->next_piece()) send(piece->text);
//   ServeResult r = h->wait();
#pragma once

#include <chrono>
#include <functional>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "ninfer/support/error.hpp"
#include "ninfer/generation/generate.hpp"
#include "ninfer/generation/scheduler.hpp"
#include "ninfer/serving/reply_text.hpp"
#include "ninfer/serving/prefix_cache.hpp"
#include "ninfer/serving/request_handle.hpp"
#include "ninfer/serving/slot_reuse.hpp"

namespace ninfer {
class CausalLM;
class Tokenizer;
} // namespace ninfer

namespace ninfer::serving {

class Sequence;

// The pending queue is full (HTTP 429).
class QueueFull : public Error {
 public:
  using Error::Error;
};

// More choices than the slots and the queue hold together: no wait makes room (HTTP 400, `n`).
class TooManyChoices : public Error {
 public:
  using Error::Error;
};
// The prompt does not fit in the context (HTTP 413).
class PromptTooLong : public Error {
 public:
  using Error::Error;
};

// What the scheduler holds right now (for /metrics).
struct EngineLoad {
  int64_t pending = 0; // waiting for a slot or for KV blocks
  int64_t running = 0; // holding a slot
  int64_t slots = 0;   // max_sequences
  // The KV block pool (CausalLM::kv_blocks_*), as of the loop's last iteration: free counts the
  // blocks no slot holds (a retired slot's rows kept for prompt reuse are held).
  int64_t kv_block_tokens = 0;
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_free = 0;
  // The prefix cache: blocks it holds, of them those only it holds (evictable), and blocks given
  // back so far for admissions.
  int64_t prefix_cache_blocks = 0;
  int64_t prefix_cache_evictable = 0;
  int64_t prefix_cache_evictions = 0;
  // Its Gated DeltaNet state copies held (of CausalLM::prefix_states()), and those given up for
  // newer ones.
  int64_t prefix_cache_states = 0;
  int64_t prefix_cache_state_evictions = 0;
  // Its host tier: what it holds and brought back so far.
  PrefixCache::HostCounts host;
  // Host-to-device bandwidth of a restore, measured when the engine started (bytes/s; 0 without
  // a host tier).
  double host_restore_bytes_per_s = 0;
};

// How one request's output is presented (what it generates does not change).
struct RequestOptions {
  // Set: the reasoning goes to ServeResult::reasoning and to pieces marked `reasoning`, the
  // answer to `text` (ninfer/serving/reply_text.hpp says how they are split).
  std::optional<ReasoningMarkers> reasoning;
  // Who asked (OpenAI's `user`): copied to ServeResult::user for the request log.
  std::string user;
};

struct EngineOptions {
  // Requests that may wait for a slot when all slots are busy; more are refused with
  // QueueFull. 0: no queue, a request is taken only if a slot is free.
  int64_t max_pending = 64;
  // A request still waiting for a slot after this long ends with finish_reason "timeout"
  // (the server answers 503). Zero: wait as long as it takes.
  std::chrono::milliseconds pending_timeout{0};
  // Called on the scheduler thread with every request's final result (finished, stopped,
  // cancelled or failed): the server's request log.
  std::function<void(const ServeResult&)> on_finish;
  // A request takes the free slot whose earlier request's tokens begin its prompt and reads only
  // the rest (ninfer/serving/slot_reuse.hpp), or shares the longest chain of full blocks other
  // requests left in the prefix cache (ninfer/serving/prefix_cache.hpp; on a model with Gated
  // DeltaNet layers, one ending where the cache kept a copy of the recurrent state, which needs
  // CausalLM::prefix_states()), whichever covers more; false: every prompt is read whole.
  bool prefix_cache = true;
  // A model with Gated DeltaNet layers: the prompt positions at which the cache keeps a state
  // copy, besides the last block boundary of every prompt: every this many (a multiple of the
  // KV block; 0: only at prompts' ends).
  int64_t prefix_state_interval = 2048;
  // Bytes of host memory (page-locked on a device) the prefix cache spills evicted blocks and
  // state copies to instead of dropping them (PrefixCache::enable_host); 0: none.
  size_t host_cache_bytes = 0;
  // Tests only: the prefix cache's chain hash (a colliding one); empty: PrefixCache::default_hash.
  PrefixCache::Hash prefix_hash;
};

class Engine {
 public:
  // `lm` and `tokenizer` (may be null: then no text, and stop strings are an error) must
  // outlive the engine. Starts the scheduler thread.
  Engine(CausalLM& lm, const Tokenizer* tokenizer, EngineOptions options = {});
  ~Engine(); // shutdown()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates and queues a request. Throws PromptTooLong, QueueFull, or Error (bad request:
  // empty prompt, id outside the vocabulary, bad sampling parameters, max_new_tokens < 1).
  // max_new_tokens is capped by the context: generation ends with "length" when it is full.
  std::shared_ptr<RequestHandle> submit(GenerationRequest request, RequestOptions options = {});
  // `choices` (>= 1) choices of one request, queued together or not at all (QueueFull): choice i
  // samples with seed + i when the request has a seed (each its own seed otherwise), so each can
  // be reproduced alone. Choice 0 reads the prompt; every other choice that gets a slot and the
  // KV blocks while choice 0 still reads its prompt becomes a copy of it at the prompt's end (its
  // prompt shared, not computed: ServeResult::forked_tokens); one that does not (no free slot
  // or blocks then, prompt logprobs asked, choice 0 gone) reads the prompt itself when its turn
  // comes, prompt reuse included. Handles in choice order.
  std::vector<std::shared_ptr<RequestHandle>> submit(GenerationRequest request, RequestOptions options,
                                                     int64_t choices);

  // The client of `handle` went away: a queued request gives its place back at once; a
  // running one stops at the next step (within one prefill chunk or one decode step).
  void cancel(RequestHandle& handle);

  // Refuses new requests, cancels the queued ones, lets running ones finish (or cancels them
  // too when `cancel_running`), and joins the scheduler. Idempotent.
  void shutdown(bool cancel_running = false);

  int64_t max_context() const;
  EngineLoad load() const;
  // The loop's counters so far (steps, rows, logits rows brought to the host), for /metrics.
  SchedulerStats stats() const;

 private:
  struct Pending {
    GenerationRequest request;
    RequestOptions options;
    std::shared_ptr<RequestHandle> handle;
    std::chrono::steady_clock::time_point submitted;
    // A further choice of a request: the handle of its choice 0, whose prompt it may copy.
    std::shared_ptr<RequestHandle> first_choice;
  };
  // Finishes a request that never got a slot, and reports it.
  void drop(Pending& p, const std::string& reason, const std::string& error = {});
  void run();
  // Ends queued requests that were cancelled or have waited longer than pending_timeout
  // (mutex_ held).
  void expire_pending();
  // Frees a finished sequence's slot, then completes its request (mutex_ held): a client that
  // sees its request finished can submit the next one into that slot at once.
  void retire(Sequence& s, std::vector<int32_t>& free_slots);
  void admit(Scheduler& loop, std::vector<std::unique_ptr<Sequence>>& active, std::vector<int32_t>& free_slots);
  // The running choice 0 of `p`'s request while it still reads its prompt, else null.
  Sequence* fork_source(const Pending& p, Scheduler& loop, std::vector<std::unique_ptr<Sequence>>& active) const;
  int64_t positions_needed(const GenerationRequest& r, int32_t slot) const;
  bool blocks_suffice(int32_t slot, int64_t keep, int64_t need, std::span<const int32_t> free_slots) const;
  bool reserve_blocks(int32_t slot, int64_t need, std::span<const int32_t> free_slots);
  // The KV pool's counts for load() (mutex_ held).
  void count_blocks();
  double measure_restore();
  bool make_room(int64_t blocks, int32_t slot, std::span<const int32_t> free_slots);
  // The prompt's state copies (EngineOptions::prefix_state_interval, the request's state_points)
  // for `h`'s sequence.
  void add_state_points(SequenceHooks& h, int32_t slot, int64_t cached, const GenerationRequest& request);

  CausalLM& lm_;
  const Tokenizer* tokenizer_;
  EngineOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  int64_t running_ = 0; // sequences holding a slot (the scheduler updates it)
  bool stopping_ = false;
  bool cancel_running_ = false;
  SchedulerStats stats_; // the loop's, copied after each iteration
  SlotReuse reuse_;      // the scheduler thread's only
  std::unique_ptr<PrefixCache> cache_; // the scheduler thread's only; null when off
  EngineLoad kv_load_;   // the KV pool's counts (mutex_)
  std::thread thread_;
};

} // namespace ninfer::serving
