// One sequence's generation loop: prefill the prompt, then sample, decode and stream text
// until a stop token, a stop string or the token limit. ninfer-run uses it directly; the
// server's scheduler batches the same steps across sequences.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ninfer/sampling/logits_processing.hpp"
#include "ninfer/sampling/sampling_params.hpp"
#include "ninfer/sampling/stop.hpp"

namespace ninfer {

class CausalLM;
class Tokenizer;

struct GenerationRequest {
  std::vector<int32_t> prompt_ids;
  SamplingParams sampling;      // sampling.top_logprobs: pairs reported per generated token
  int64_t max_new_tokens = 256;
  StopConditions stop;          // stop token ids (not emitted) and stop strings (not emitted)
  int64_t prompt_logprobs = 0;  // K most likely next tokens after each prompt prefix (--echo)
  // Continue the slot's sequence: prompt_ids are appended to what the slot already holds (the
  // next turn of a chat whose earlier turns are still in the KV cache and GDN state) instead of
  // starting afresh. The context must hold the slot's tokens, the prompt and max_new_tokens.
  bool append = false;
  // Prompt positions worth resuming later prompts from (the end of a chat's first message: a
  // system prompt other conversations share). On a model with Gated DeltaNet layers the prefix
  // cache keeps a copy of the recurrent state there too, rounded down to a KV block (ninfer-serve
  // sets it; serving::EngineOptions::prefix_state_interval gives the regular ones).
  std::vector<int64_t> state_points;
  // A cap on the reply's reasoning (Qwen's <think> block): unless one of the reply's first
  // `tokens` tokens is `end_id` (</think>), the next token is end_id, forced rather than sampled
  // (logprob 0), and the answer follows. Counted from the reply's first token (a <think> the
  // model opens with included). tokens >= 1.
  struct ThinkingBudget {
    int64_t tokens = 0;
    int32_t end_id = -1;
  };
  std::optional<ThinkingBudget> thinking_budget;
  // When set (by another thread or a signal handler), generation stops: between prefill chunks
  // and before each new token. finish_reason is then "cancelled".
  const std::atomic<bool>* cancel = nullptr;
};

// What speculative rounds did for a sequence or a loop (docs/speculative.md).
struct SpecCounts {
  int64_t rows = 0;                 // a sequence's part of one round
  std::vector<int64_t> accepted_at; // per draft position j: rows whose draft j was accepted
  int64_t tokens = 0;               // tokens the rows produced: accepted drafts + 1 each
  // A row of a round with `drafts` drafts that accepted `accepted` of them.
  void add(int32_t accepted, int32_t drafts);
  void add(const SpecCounts& o);
  // Rows that accepted draft j, of all rows: the acceptance at position j (0 when none ran).
  double acceptance(size_t j) const;
  // Tokens per row: 1 + the accepted drafts, averaged.
  double mean_accepted_length() const;
};

struct GenerationTimings {
  double prefill_s = 0;      // prompt forward pass(es), first token's logits included
  double decode_s = 0;       // every later forward pass
  double first_token_s = 0;  // from start to the first sampled token
  double sampling_s = 0;     // host-side sampling, all steps
};

struct GenerationResult {
  std::vector<int32_t> generated_ids;          // the stop token, if any, is not included
  std::vector<float> generated_logprobs;       // of each generated id
  std::vector<std::vector<TokenLogprob>> generated_top; // per generated id (sampling.top_logprobs)
  std::vector<std::vector<TokenLogprob>> prompt_top;    // per prompt position (prompt_logprobs)
  std::vector<float> prompt_logprobs;          // per prompt token from the second on (prompt_logprobs)
  std::string text;                            // decoded output, stop string removed
  std::string finish_reason;                   // "stop" (token or string), "length" or "cancelled"
  std::optional<std::string> stop_string;      // which stop string ended it
  std::optional<int32_t> stop_token;           // which stop token ended it
  uint64_t seed = 0;                           // the sampler's seed (replay with --seed)
  GenerationTimings timings;
  SpecCounts spec;                             // empty unless the model speculates
};

// Called with each piece of text as soon as it is safe to show (complete UTF-8, not part of
// a possible stop string).
using TextSink = std::function<void(std::string_view)>;

// Called after each prefill chunk (CausalLM's prefill_chunk tokens) with the prompt tokens done.
using PrefillProgress = std::function<void(int64_t done, int64_t total)>;

// Runs the request on `slot` of `lm` (the slot is reset first unless request.append). `tokenizer`
// may be null: then no text is produced and stop strings are an error. Throws ninfer::Error for a
// bad request (empty prompt, ids outside the vocabulary, prompt plus max_new_tokens beyond the
// context).
//
// Afterwards the slot holds a prefix of prompt_ids + generated_ids + [stop_token] (decode steps
// may have run ahead of the last token read): its lm.position() tokens, which a later request
// with `append` continues.
GenerationResult generate(CausalLM& lm, int32_t slot, const Tokenizer* tokenizer, const GenerationRequest& request,
                          const TextSink& on_text = {}, const PrefillProgress& on_prefill = {});

} // namespace ninfer
