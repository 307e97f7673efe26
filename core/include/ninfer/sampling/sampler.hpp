// Per-sequence token sampler on host float32 logits. It owns the sequence's PRNG (so one
// sequence's draws never depend on another's) and its token history (for the penalties).
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
  const TokenHistory& history() const { return history_; }

 private:
  // Uniform in [0, 1) from the top 53 bits: the same on every standard library (the
  // std:: distributions are implementation-defined; mt19937_64 itself is not).
  double uniform();

  SamplingParams params_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  TokenHistory history_;
  std::vector<float> penalised_; // scratch: logits after penalties
};

} // namespace ninfer
