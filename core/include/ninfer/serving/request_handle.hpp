// The HTTP side's view of one queued or running request: text pieces as the scheduler
// produces them, the final result, and a cancel flag (set when the client goes away).
// Shared between the HTTP thread that waits on it and the scheduler thread that fills it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ninfer/generation/generate.hpp"
#include "ninfer/sampling/logits_processing.hpp"

namespace ninfer::serving {

// Server-side timings of one request (seconds), measured by the engine's scheduler.
struct ServeTimings {
  double queue_s = 0;       // submitted -> given a slot
  double prefill_s = 0;     // given a slot -> prompt read and the first token sampled
  double first_token_s = 0; // submitted -> first token sampled (time to first token)
  double decode_s = 0;      // first token -> last token
  // The same moments as unix times (system clock, seconds), so a request log can be lined up
  // with other requests and with a client's clock: submitted, given a slot, first token
  // (0 when none was sampled).
  double submitted_at = 0, admitted_at = 0, first_token_at = 0;
};

struct ServeResult {
  std::vector<int32_t> generated_ids; // the stop token, if any, is not included
  std::string text;                   // stop string removed; without the reasoning when it is split off
  std::string reasoning;              // the text between <think> and </think> (RequestOptions::reasoning)
  // Per generated id (same length as generated_ids): log_softmax of the raw logits at the
  // chosen id, and the sampling.top_logprobs most likely (id, logprob), best first.
  std::vector<float> logprobs;
  std::vector<std::vector<TokenLogprob>> top_logprobs;
  // With GenerationRequest::prompt_logprobs K > 0: per prompt token from the second on, its
  // log-probability after the ones before; per prompt position, the K most likely next tokens.
  std::vector<float> prompt_logprobs;
  std::vector<std::vector<TokenLogprob>> prompt_top_logprobs;
  std::string finish_reason;          // "stop", "length", "cancelled" or "error"
  std::string error;                  // finish_reason "error": what went wrong
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0; // of them, read from the slot's earlier request (SlotReuse) or the prefix cache, not computed
  // Of them, copied from the first choice of the same request (Engine::submit's `choices`,
  // CausalLM::fork), not computed: the whole prompt for a choice that forked, else 0.
  int64_t forked_tokens = 0;
  std::string user; // RequestOptions::user
  ServeTimings timings;
  SpecCounts spec;  // its rows of speculative rounds (docs/speculative.md)
};

// The prompt's scores (GenerationRequest::prompt_logprobs K > 0), as ServeResult holds them.
struct PromptScores {
  std::vector<float> logprobs;
  std::vector<std::vector<TokenLogprob>> top_logprobs;
};

// What one generated token adds to the stream: its id and the text now safe to show (often
// empty: a character split over tokens, text held back as a possible stop string, or a model
// without a tokenizer). A request that scores its prompt gets one piece ahead of the first
// token's carrying only `prompt` (a stream that echoes the prompt shows it there).
struct StreamPiece {
  int32_t token = -1;     // -1: text only (the tail released when generation ends)
  std::string text;
  bool reasoning = false; // `text` belongs to the reasoning, not the answer
  float logprob = 0;      // of `token`
  std::vector<TokenLogprob> top_logprobs;
  std::optional<PromptScores> prompt;
};

class RequestHandle {
 public:
  // Scheduler side.
  void push(StreamPiece piece);
  void finish(ServeResult result);

  // HTTP side. next_piece blocks until a piece or the end; returns nullopt once finished and
  // every piece was taken.
  std::optional<StreamPiece> next_piece();
  // Without blocking: the next piece if one is ready.
  std::optional<StreamPiece> try_next_piece();
  bool finished();
  // Without blocking: the result once finished and every piece was taken.
  std::optional<ServeResult> try_result();
  // Called (on the scheduler's thread, possibly with its lock held: post work elsewhere, do
  // not block) after every push and at the finish, and once right away for what came earlier.
  void set_notify(std::function<void()> notify);
  ServeResult wait();
  // wait() for at most `timeout`: nullopt if the request is still running.
  std::optional<ServeResult> wait_for(std::chrono::milliseconds timeout);
  // Sets the flag the scheduler checks between steps. Engine::cancel also frees a queue place.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<StreamPiece> pieces_;
  std::optional<ServeResult> result_;
  std::function<void()> notify_;
  std::atomic<bool> cancelled_{false};
};

} // namespace ninfer::serving
