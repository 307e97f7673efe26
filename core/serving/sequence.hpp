// One request while it holds a slot: its prompt progress, sampler, streaming decoder and stop
// matcher. It turns each row of logits into a token and text; the engine owns the model calls.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "ninfer/generation/generate.hpp"
#include "ninfer/sampling/sampler.hpp"
#include "ninfer/serving/engine.hpp"
#include "ninfer/serving/request_handle.hpp"

namespace ninfer::serving {

// A steady-clock moment as unix time (seconds), for the request log.
double unix_time(std::chrono::steady_clock::time_point t);

class Sequence {
 public:
  using Clock = std::chrono::steady_clock;
  Sequence(int32_t slot, GenerationRequest request, const RequestOptions& options, std::shared_ptr<RequestHandle> handle,
           const Tokenizer* tokenizer, int64_t max_context, Clock::time_point submitted);

  int32_t slot() const { return slot_; }
  RequestHandle& handle() { return *handle_; }
  const std::vector<int32_t>& prompt() const { return request_.prompt_ids; }
  bool prefilling() const { return prefilled_ < static_cast<int64_t>(request_.prompt_ids.size()); }
  int64_t prefilled() const { return prefilled_; }
  void advance_prefill(int64_t n) { prefilled_ += n; }
  // The token the next decode step feeds (the last one sampled).
  int32_t next_input() const { return next_input_; }
  // Finished: result() is final. The engine hands it to the client once the slot is free.
  bool done() const { return done_; }
  const ServeResult& result() const { return result_; }

  // Samples from one row of logits; streams text; returns true when the request is finished.
  bool on_logits(std::span<const float> row);
  // Ends the request early (client gone, shutdown, model error).
  void abort(const std::string& reason, const std::string& error = {});

 private:
  void complete(std::string reason);

  // Fills result_.timings up to now and marks the sequence done.
  void finish();

  int32_t slot_;
  GenerationRequest request_;
  std::shared_ptr<RequestHandle> handle_;
  int64_t max_context_;
  Sampler sampler_;
  ReplyText text_;
  ServeResult result_;
  int64_t prefilled_ = 0;
  int32_t next_input_ = -1;
  bool done_ = false;
  Clock::time_point submitted_, admitted_, first_token_;
};

} // namespace ninfer::serving
