#include "ninfer/sampling/sampler.hpp"

#include <random>
#include <utility>

#include "ninfer/abi/ops/sample_math.h"

namespace ninfer {
namespace {

SamplingParams validated(SamplingParams p) {
  p.validate();
  return p;
}

uint64_t seed_or_random(const std::optional<uint64_t>& seed) {
  if (seed) return *seed;
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

} // namespace

Sampler::Sampler(SamplingParams params, std::span<const TokenId> prompt)
    : params_(validated(std::move(params))), seed_(seed_or_random(params_.seed)),
      history_(prompt) {}

double Sampler::uniform() { return static_cast<double>(ninfer_sample_draw(seed_, claim_draw()) >> 11) * 0x1.0p-53; }

SampleResult Sampler::sample(std::span<const float> logits) {
  penalised_.assign(logits.begin(), logits.end());
  apply_logit_bias(penalised_, params_.logit_bias);
  apply_repetition_penalty(penalised_, history_, params_.repetition_penalty);
  apply_presence_frequency_penalties(penalised_, history_, params_.presence_penalty,
                                     params_.frequency_penalty);

  SampleResult r;
  if (params_.is_greedy()) {
    r.token = argmax(penalised_);
  } else {
    const std::vector<Candidate> dist = filtered_distribution(
        penalised_, {params_.temperature, params_.top_k, params_.top_p, params_.min_p});
    // Inverse CDF over the candidates in id order; rounding can leave u just above the last
    // cumulative sum, so the last candidate is the fallback.
    const double u = uniform();
    double cum = 0;
    r.token = dist.back().id;
    for (const Candidate& c : dist) {
      cum += c.prob;
      if (u < cum) {
        r.token = c.id;
        break;
      }
    }
  }

  const double lse = log_sum_exp(logits);
  r.logprob = static_cast<float>(static_cast<double>(logits[r.token]) - lse);
  if (params_.top_logprobs > 0) r.top_logprobs = top_logprobs(logits, lse, params_.top_logprobs);
  return r;
}

void Sampler::accept(TokenId token) { history_.add_generated(token); }

SampleResult Sampler::next(std::span<const float> logits) {
  SampleResult r = sample(logits);
  accept(r.token);
  return r;
}

} // namespace ninfer
