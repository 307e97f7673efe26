// How one sequence chooses its next token. The defaults leave the model's distribution
// untouched (temperature 1, no filters, no penalties); temperature 0 (or below 1e-5) means greedy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ninfer/abi/ops/sample_math.h"
#include "ninfer/support/error.hpp"

namespace ninfer {

using TokenId = int32_t;

// The repetition penalty's allowed range (validate()).
inline constexpr double kMinRepetitionPenalty = 0.01;
inline constexpr double kMaxRepetitionPenalty = 100.0;
// A logit bias's range (OpenAI's): -100 bans a token in practice, 100 all but forces it.
inline constexpr double kMaxLogitBias = 100.0;

struct SamplingParams {
  double temperature = 1.0;        // 0 (below 1e-5) = greedy (argmax of the penalised logits)
  int64_t top_k = 0;               // keep the k most likely tokens; 0 = off
  double top_p = 1.0;              // keep the smallest head whose mass reaches top_p; 1 = off
  double min_p = 0.0;              // keep tokens with p >= min_p * p_max; 0 = off
  double repetition_penalty = 1.0; // HF: tokens in prompt+output, positive / p, negative * p
  double presence_penalty = 0.0;   // OpenAI: minus this once for every token generated so far
  double frequency_penalty = 0.0;  // OpenAI: minus this times how often it was generated
  std::optional<uint64_t> seed;    // same seed + same logits => same tokens; unset = random
  int64_t top_logprobs = 0;        // how many (id, logprob) pairs to report per token
  // Added to these tokens' logits before anything else (OpenAI's logit_bias), one entry per id.
  std::vector<std::pair<TokenId, double>> logit_bias;

  // The sample op's line (NINFER_SAMPLE_MIN_TEMPERATURE): the host and the device agree on it.
  bool is_greedy() const { return ninfer_sample_greedy(temperature); }

  // Throws InvalidSampling naming the first field that is out of range and its allowed range.
  void validate() const;
};

// A SamplingParams field out of its range: "sampling: FIELD PROBLEM" as the message, and the
// two parts apart for an API error that names the request's field.
struct InvalidSampling : Error {
  InvalidSampling(std::string field, std::string problem);
  std::string field;   // "top_p"
  std::string problem; // "must be in (0, 1] (1 turns it off), got 0"
};

} // namespace ninfer
