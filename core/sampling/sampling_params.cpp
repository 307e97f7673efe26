#include "ninfer/sampling/sampling_params.hpp"

#include <fmt/format.h>

#include <cmath>

#include "ninfer/support/error.hpp"

namespace ninfer {
namespace {

void require(bool ok, const char* field, const char* allowed, double got) {
  if (!ok) throw InvalidSampling(field, fmt::format("must be {}, got {}", allowed, got));
}

} // namespace

InvalidSampling::InvalidSampling(std::string f, std::string p)
    : Error(fmt::format("sampling: {} {}", f, p)), field(std::move(f)), problem(std::move(p)) {}

void SamplingParams::validate() const {
  require(std::isfinite(temperature) && temperature >= 0, "temperature", ">= 0 (0, or below 1e-5, means greedy)",
          temperature);
  require(top_k >= 0, "top_k", ">= 0 (0 turns it off)", static_cast<double>(top_k));
  require(top_p > 0 && top_p <= 1, "top_p", "in (0, 1] (1 turns it off)", top_p);
  require(min_p >= 0 && min_p <= 1, "min_p", "in [0, 1] (0 turns it off)", min_p);
  // Penalised logits are divided (or multiplied) by it in float: outside this range they
  // overflow to infinity (1e-300 rounds to a float 0) or the output only degenerates.
  require(repetition_penalty >= kMinRepetitionPenalty && repetition_penalty <= kMaxRepetitionPenalty,
          "repetition_penalty", "in [0.01, 100] (1 turns it off)", repetition_penalty);
  // OpenAI's range; larger values only make the output degenerate.
  require(presence_penalty >= -2 && presence_penalty <= 2, "presence_penalty",
          "in [-2, 2] (0 turns it off)", presence_penalty);
  require(frequency_penalty >= -2 && frequency_penalty <= 2, "frequency_penalty",
          "in [-2, 2] (0 turns it off)", frequency_penalty);
  require(top_logprobs >= 0, "top_logprobs", ">= 0", static_cast<double>(top_logprobs));
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0) throw InvalidSampling("logit_bias", fmt::format("token id {} is negative", id));
    if (!(std::isfinite(bias) && bias >= -kMaxLogitBias && bias <= kMaxLogitBias))
      throw InvalidSampling("logit_bias", fmt::format("token {}: a bias must be in [-100, 100], got {}", id, bias));
  }
}

} // namespace ninfer
