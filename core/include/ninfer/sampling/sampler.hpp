// Per-sequence token sampler on host float32 logits. It owns the sequence's random stream (so one
// sequence's draws never depend on another's) and its token history (for the penalties).
// The stream is counter-based: draw k is ninfer_sample_draw(seed, k) (ninfer/abi/ops/sample_math.h),
// the same numbers the sample op uses on a device, so host and device choose the same tokens.
// It knows nothing about models or tokenizers: logits and token ids in, a token id out.
//
// Logprobs are those of the RAW model distribution, log_softmax(logits) before penalties,
// temperature and filters — what the model says, comparable across sampling settings and
// with transformers' logits. docs/sampling.md has the details.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "ninfer/sampling/logits_processing.hpp"
#include "ninfer/sampling/sampling_params.hpp"
#include "ninfer/sampling/token_history.hpp"

namespace ninfer {

struct SampleResult {
  TokenId token = -1;
  float logprob = 0;                      // log_softmax(logits)[token]
  std::vector<TokenLogprob> top_logprobs; // params.top_logprobs most likely, best first
};

class Sampler {
 public:
  // Validates `params` (throws ninfer::Error). Without a seed, one is drawn from
  // std::random_device; seed() tells which, so a run can be replayed.
  Sampler(SamplingParams params, std::span<const TokenId> prompt);

  // Chooses the next token from one row of logits (size = vocabulary). Does not record it.
  SampleResult sample(std::span<const float> logits);
  // Records a generated token, for the penalties of later steps.
  void accept(TokenId token);
  // sample() then accept().
  SampleResult next(std::span<const float> logits);

  const SamplingParams& params() const { return params_; }
  uint64_t seed() const { return seed_; }
  // Random draws made so far; the next one is number draws().
  uint64_t draws() const { return draws_; }
  // Hands the next draw's number to a sampler elsewhere (the sample op on a device), as if
  // this one had drawn it, and returns it.
  uint64_t claim_draw() { return draws_++; }
  const TokenHistory& history() const { return history_; }

 private:
  // Uniform in [0, 1) from the top 53 bits of the next draw.
  double uniform();

  SamplingParams params_;
  uint64_t seed_;
  uint64_t draws_ = 0;
  TokenHistory history_;
  std::vector<float> penalised_; // scratch: logits after penalties
};

} // namespace ninfer
