// The steps that turn a row of logits into the distribution a token is drawn from, each a
// pure function so tests can check it against the formula. The sampler applies them in this
// order (transformers' order for the penalties and filters, with the logit bias first, as vLLM
// applies it):
//   logit bias -> repetition penalty -> presence/frequency penalties -> temperature -> top-k
//   -> top-p -> min-p
// Penalties work in place on float32 logits, as transformers does; temperature and the
// filters work in float64.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ninfer/sampling/sampling_params.hpp"
#include "ninfer/sampling/token_history.hpp"

namespace ninfer {

// OpenAI semantics: l[id] += bias for each entry. Throws ninfer::Error for an id outside the logits.
void apply_logit_bias(std::span<float> logits, std::span<const std::pair<TokenId, double>> bias);

// Hugging Face semantics (RepetitionPenaltyLogitsProcessor): for every distinct id in prompt
// and output, a logit l < 0 becomes l * penalty, otherwise l / penalty. Once per id.
void apply_repetition_penalty(std::span<float> logits, const TokenHistory& history, double penalty);

// OpenAI semantics, generated tokens only: l[j] -= count[j] * frequency + (count[j] > 0) * presence.
void apply_presence_frequency_penalties(std::span<float> logits, const TokenHistory& history,
                                        double presence, double frequency);

// Index of the largest logit; ties go to the lowest id.
TokenId argmax(std::span<const float> logits);

struct Candidate {
  TokenId id;
  double prob; // renormalised over the kept tokens
};

struct FilterParams {
  double temperature = 1.0; // > 0
  int64_t top_k = 0;
  double top_p = 1.0;
  double min_p = 0.0;
};

// The distribution sampling draws from: softmax(logits / temperature) restricted to
//  - top-k: exactly the k most likely tokens (ties at the boundary go to the lower id);
//  - top-p: of those, the most likely tokens while the mass before them (in the top-k
//    renormalised distribution) is < top_p — the smallest head whose mass reaches top_p;
//  - min-p: of those, tokens with p >= min_p * p_max (independent of renormalisation),
// renormalised, sorted by id. Tokens of probability 0 (-inf logits) are never in it; the most
// likely token always is. Throws ninfer::Error on empty logits, a NaN or +inf, or when every
// logit is -inf.
std::vector<Candidate> filtered_distribution(std::span<const float> logits, const FilterParams& p);

// log(sum(exp(logits))), computed stably in float64.
double log_sum_exp(std::span<const float> logits);

struct TokenLogprob {
  TokenId id;
  float logprob;
};

// The k highest entries of log_softmax(logits) (given its log_sum_exp), most likely first;
// ties go to the lower id.
std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, double lse, int64_t k);

} // namespace ninfer
