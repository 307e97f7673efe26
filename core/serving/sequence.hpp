// One request while it holds a slot: what the engine loop (ninfer/generation/scheduler.hpp)
// reports about it, turned into what its client sees: streamed pieces with text (stop strings,
// the reasoning split), the final result and its timings. The loop owns the model calls.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ninfer/generation/scheduler.hpp"
#include "ninfer/serving/engine.hpp"
#include "ninfer/serving/request_handle.hpp"

namespace ninfer::serving {

// A steady-clock moment as unix time (seconds), for the request log.
double unix_time(std::chrono::steady_clock::time_point t);

class Sequence {
 public:
  using Clock = std::chrono::steady_clock;
  // `request` is the whole request (its whole prompt), of which `cached_tokens` leading prompt
  // tokens were already in the slot.
  Sequence(int32_t slot, const GenerationRequest& request, const RequestOptions& options,
           std::shared_ptr<RequestHandle> handle, const Tokenizer* tokenizer, Clock::time_point submitted,
           int64_t cached_tokens = 0);

  // The hooks the loop calls for this request; they refer to this object, which must live until
  // it is done().
  SequenceHooks hooks();

  int32_t slot() const { return slot_; }
  RequestHandle& handle() { return *handle_; }
  // Finished: result() is final. The engine hands it to the client once the slot is free.
  bool done() const { return done_; }
  const ServeResult& result() const { return result_; }
  // Once done(): the tokens the slot was fed, as far as they are known: the whole prompt, the
  // generated ids and the stop token (SlotReuse::ended keeps the first position() of them).
  std::vector<int32_t> fed_tokens() const;

 private:
  // Streams one generated token; true when a stop string ended the reply.
  bool on_token(const SampleResult& s);
  void on_end(const SequenceOutcome& o);

  int32_t slot_;
  std::shared_ptr<RequestHandle> handle_;
  ReplyText text_;
  ServeResult result_;
  bool done_ = false;
  std::vector<int32_t> prompt_;
  std::optional<int32_t> stop_token_;
  Clock::time_point submitted_;
};

} // namespace ninfer::serving
