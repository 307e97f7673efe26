// The logit bias and the repetition, presence and frequency penalties (see logits_processing.hpp
// for the formulas).
#include <fmt/format.h>

#include "ninfer/support/error.hpp"
#include "ninfer/sampling/logits_processing.hpp"

namespace ninfer {
namespace {

void check_id(TokenId id, size_t vocab, const char* where) {
  if (id < 0 || static_cast<size_t>(id) >= vocab)
    throw Error(fmt::format("sampling: token id {} in the {} is outside the vocabulary (logits have {} entries)", id,
                            where, vocab));
}

} // namespace

void apply_logit_bias(std::span<float> logits, std::span<const std::pair<TokenId, double>> bias) {
  for (const auto& [id, b] : bias) {
    check_id(id, logits.size(), "logit bias");
    logits[id] = static_cast<float>(static_cast<double>(logits[id]) + b);
  }
}

void apply_repetition_penalty(std::span<float> logits, const TokenHistory& history, double penalty) {
  if (penalty == 1.0) return;
  const float p = static_cast<float>(penalty);
  for (TokenId id : history.seen()) {
    check_id(id, logits.size(), "history");
    float& l = logits[id];
    l = l < 0 ? l * p : l / p;
  }
}

void apply_presence_frequency_penalties(std::span<float> logits, const TokenHistory& history,
                                        double presence, double frequency) {
  if (presence == 0.0 && frequency == 0.0) return;
  for (const auto& [id, count] : history.generated_counts()) {
    check_id(id, logits.size(), "history");
    logits[id] -= static_cast<float>(static_cast<double>(count) * frequency + presence);
  }
}

} // namespace ninfer
