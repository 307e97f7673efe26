// The tokens a sequence has seen, in the form the penalties need: the set of ids in prompt +
// output (repetition penalty) and how often each id was generated (presence / frequency).
// Updating is O(1) per token, so penalties cost O(distinct tokens), not O(sequence length).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <unordered_set>

#include "ninfer/sampling/sampling_params.hpp"

namespace ninfer {

class TokenHistory {
 public:
  TokenHistory() = default;
  explicit TokenHistory(std::span<const TokenId> prompt);

  void add_prompt(TokenId id);
  void add_generated(TokenId id);

  // Every distinct id in prompt and output.
  const std::unordered_set<TokenId>& seen() const { return seen_; }
  // Distinct generated ids and their counts.
  const std::unordered_map<TokenId, int64_t>& generated_counts() const { return generated_; }

 private:
  std::unordered_set<TokenId> seen_;
  std::unordered_map<TokenId, int64_t> generated_;
};

} // namespace ninfer
