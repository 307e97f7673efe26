// The engine loop every generating program drives: generate() (ninfer-run, a batch of one) and
// serving::Engine (ninfer-serve). Sequences hold model slots; each iteration queues one forward
// pass: a chunk of the oldest prompt still being read and a row for every sequence that can take
// a token (a mixed step: the weights are read once for both, and the chunk is kept short,
// ModelOptions::mixed_chunk, while others decode), then reads the results of the previous
// iteration's step, so the device always has the next step while the host reads, samples,
// checks and streams the current one. Tokens are
// chosen on the backend (argmax or the sample op, fed by the previous pick on the backend);
// only a sequence whose sampling the backend lacks (penalties, top logprobs) brings its logits
// row back, and only its row. With a model that speculates (ModelOptions::speculation),
// sequences picked on the backend (greedy or sampled) decode in speculative rounds instead, all
// of them in one round
// per iteration; a round's result is read before the next round is queued (its accepted drafts
// decide the positions). A sequence may also start as a copy of another right after that one's
// prompt (add_fork: the prompt is read once for several choices of one request). docs/serving.md,
// "The engine loop", has the details.
//
//   Scheduler loop(lm);
//   loop.add(slot, request, {.on_token = ..., .on_end = ...});
//   while (loop.busy()) loop.step();
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ninfer/generation/generate.hpp"
#include "ninfer/sampling/sampler.hpp"

namespace ninfer {

class CausalLM;

// What one sequence produced, all but its text (the owner makes text from the tokens).
struct SequenceOutcome {
  using Clock = std::chrono::steady_clock;
  std::vector<int32_t> generated_ids;        // the stop token, if any, is not included
  std::vector<float> generated_logprobs;     // raw log-probability of each generated id
  std::vector<std::vector<TokenLogprob>> generated_top; // per generated id (sampling.top_logprobs > 0)
  std::vector<std::vector<TokenLogprob>> prompt_top;    // per prompt position (prompt_logprobs > 0)
  // Per prompt token from the second on (prompt_logprobs > 0): its log-probability after the
  // tokens before it, log_softmax of the raw logits.
  std::vector<float> prompt_logprobs;
  std::string finish_reason;                 // "stop", "length", "cancelled" or "error"
  std::string error;                         // finish_reason "error": what went wrong
  std::optional<int32_t> stop_token;         // which stop token ended it
  uint64_t seed = 0;                         // the sampler's seed (a replay passes it back)
  SpecCounts spec;                           // its rows of speculative rounds
  int64_t forked_tokens = 0;                 // prompt tokens copied from another sequence (add_fork), not read
  // Moments: added to the loop, the first token read (after its sampling), the end. A moment
  // never reached stays Clock::time_point{}.
  Clock::time_point added, first_token, ended;
  double sampling_s = 0;                     // host sampling (rows whose logits came back)
};

// How the loop talks to a sequence's owner, on the loop's thread.
struct SequenceHooks {
  // After each prompt chunk is queued: prompt tokens queued so far, of all.
  std::function<void(int64_t done, int64_t total)> on_prefill;
  // Where the prompt chunk starting after `done` tokens must end at the latest (a count of
  // prompt tokens > done): the serving prefix cache's state copies are taken between chunks.
  // Unset: chunks are as long as the step allows.
  std::function<int64_t(int64_t done)> chunk_end;
  // Once the prompt is scored (GenerationRequest::prompt_logprobs > 0), before its first token:
  // the outcome's prompt_logprobs and prompt_top are complete.
  std::function<void(const SequenceOutcome&)> on_prompt_scored;
  // Each generated token as it is read (never a stop token); returns true to end the sequence
  // with "stop" there (a stop string matched).
  std::function<bool(const SampleResult&)> on_token;
  // Once, when the sequence ends; its slot may be given to another sequence at once (its steps
  // still queued run, and add() resets the slot before the newcomer's first step).
  std::function<void(SequenceOutcome&)> on_end;
  // Polled once per iteration: true ends the sequence with "cancelled" (within one step).
  std::function<bool()> cancelled;
};

// Counters over the loop's life (the server's /metrics).
struct SchedulerStats {
  int64_t decode_steps = 0;  // steps queued with one-token rows (mixed steps included)
  int64_t decode_rows = 0;   // one-token rows of those steps
  int64_t chained_rows = 0;  // of them, rows fed by the previous pick on the backend
  int64_t prompt_chunks = 0; // prompt chunks run
  int64_t prompt_tokens = 0; // their tokens: the prompt tokens computed
  int64_t forks = 0;         // sequences started as a copy of another's prompt (add_fork)
  int64_t mixed_steps = 0;   // steps that carried a prompt chunk and one-token rows together
  int64_t logits_rows = 0;   // logits rows brought to the host (host sampling, prompt logprobs)
  int64_t spec_rounds = 0;   // speculative rounds queued
  SpecCounts spec;           // their rows, as read
};

class Scheduler {
 public:
  // `lm` must outlive the loop and have no step results unread.
  explicit Scheduler(CausalLM& lm);
  // Forgets the results not read (their steps still run, as after a stop token).
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Starts `request` in `slot`, which no running sequence holds: the slot is reset first unless
  // request.append. Generation ends with "length" at max_new_tokens or when the context is
  // full. Throws ninfer::Error for a bad slot, an empty prompt, ids outside the vocabulary, bad
  // sampling parameters, or a prompt that leaves no room for a token. Not from inside a hook.
  void add(int32_t slot, GenerationRequest request, SequenceHooks hooks);
  // Starts `request` in `slot` as a copy of the sequence in slot `from` right after that one's
  // prompt, so its prompt is not read again: when `from`'s last prompt chunk is queued, the slot
  // becomes a copy of `from` (CausalLM::fork, before anything feeds `from`'s first token), and the
  // sequence draws its first token from that chunk's logits row on the host (its own sampler:
  // its seed, draw 0), then decodes as any other. If `from` ends before its prompt is read, or
  // the fork is refused, the request reads its prompt itself. request.prompt_ids must be the
  // whole prompt `from` ends at (not append, no prompt logprobs). Throws ninfer::Error as add()
  // does, and when `from` holds no sequence still reading its prompt or ends it elsewhere.
  void add_fork(int32_t from, int32_t slot, GenerationRequest request, SequenceHooks hooks);
  // Whether slot `slot` holds a running sequence whose prompt is not all queued yet (add_fork
  // can still copy it).
  bool reading_prompt(int32_t slot) const;
  // One iteration (see above). Hooks run inside it.
  void step();
  // Whether a sequence is still running.
  bool busy() const { return !running_.empty(); }
  // Ends every running sequence with `reason` (shutdown); their queued steps still run.
  void end_all(const std::string& reason);
  const SchedulerStats& stats() const { return stats_; }

 private:
  struct Sequence;
  using SequencePtr = std::shared_ptr<Sequence>;
  // A queued step with a result: its sequences by row (null: a row whose pick nobody reads, a
  // prompt chunk that does not end its prompt), and the iteration that queued it.
  struct InFlight {
    std::vector<SequencePtr> rows;
    std::vector<bool> logits; // per row: its logits row came back
    int64_t iteration = 0;
    bool round = false;       // a speculative round (its rows' tokens are accepted drafts + 1)
    // Sequences forked from row 0's prompt (its last chunk): each samples its first token from
    // that row's logits.
    std::vector<SequencePtr> forks;
  };
  // The step an iteration builds: its rows and what their results go to.
  struct StepBuild;
  // The prompt chunk of an iteration: whose, how many tokens, whether it ends the prompt.
  struct Chunk;

  // Queues the iteration's step: a prompt chunk, one-token rows, or both (a mixed step).
  void queue_iteration();
  // The chunk of the oldest prompt still being read, if any: mixed_chunk tokens while another
  // sequence decodes, else prefill_chunk.
  std::optional<Chunk> next_chunk() const;
  // A row for every sequence that can take a token now (in a step: those not in a round).
  void add_decode_rows(StepBuild& b);
  // One speculative round for every sequence that speculates and can take tokens now.
  void queue_round();
  // Whether the sequence's next tokens come from rounds: it speculates and a round's positions
  // still fit its context.
  bool in_rounds(const Sequence& s) const;
  // Whether this iteration may run a round: at most Speculation::max_batch sequences decode.
  bool rounds_open() const;
  // Reads results until no round is unread (a round decides its rows' positions).
  void read_rounds();
  // After the chunk's step is queued: its logits rows for prompt logprobs, progress, its end.
  void chunk_queued(const Chunk& c);
  // After the last chunk of `s`'s prompt is queued: the sequences waiting to copy it fork from
  // it; their first tokens come from `rows` (prompt logprobs) or the chunk's result.
  void fork_waiting(Sequence& s, const std::vector<float>& rows);
  // A sequence for `slot` after add()'s checks (the sampler validates the request).
  std::shared_ptr<Sequence> make_sequence(int32_t slot, GenerationRequest& r, SequenceHooks& hooks) const;
  // Reads the oldest unread result and hands its tokens to their sequences.
  void read_oldest();
  // Reads results until at most `keep` are unread.
  void read_until(size_t keep);
  void take_token(Sequence& s, int32_t id, float logprob, const float* logits);
  void end(Sequence& s, const std::string& reason, const std::string& error = {});

  CausalLM& lm_;
  std::vector<SequencePtr> running_; // in the order they were added
  std::deque<InFlight> in_flight_;
  int64_t iteration_ = 0;
  bool rounds_open_ = true; // rounds_open(), as of this iteration's start, then of its round
  SchedulerStats stats_;
};

} // namespace ninfer
