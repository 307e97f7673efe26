#include "ninfer/sampling/token_history.hpp"

namespace ninfer {

TokenHistory::TokenHistory(std::span<const TokenId> prompt) {
  for (TokenId id : prompt) add_prompt(id);
}

void TokenHistory::add_prompt(TokenId id) { seen_.insert(id); }

void TokenHistory::add_generated(TokenId id) {
  seen_.insert(id);
  ++generated_[id];
}

} // namespace ninfer
