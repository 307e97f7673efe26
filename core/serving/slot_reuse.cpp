#include "ninfer/serving/slot_reuse.hpp"

#include <algorithm>

#include "ninfer/support/error.hpp"

namespace ninfer::serving {

SlotReuse::SlotReuse(int32_t slots, bool rewindable, bool enabled)
    : slots_(static_cast<size_t>(std::max(slots, 0))), rewindable_(rewindable), enabled_(enabled) {}

int64_t SlotReuse::reusable(const Slot& s, std::span<const int32_t> prompt) const {
  // At least one prompt token is read afresh: its logits give the first generated token.
  const size_t most = prompt.empty() ? 0 : prompt.size() - 1;
  const auto mismatch = std::mismatch(s.tokens.begin(), s.tokens.end(), prompt.begin(), prompt.end());
  const auto common = static_cast<size_t>(mismatch.first - s.tokens.begin());
  if (rewindable_) return static_cast<int64_t>(std::min(common, most));
  // A recurrent state covers all of the slot's tokens: all or nothing.
  return common == s.tokens.size() && common <= most ? static_cast<int64_t>(common) : 0;
}

SlotReuse::Choice SlotReuse::choose(std::span<const int32_t> prompt, std::span<const int32_t> free_slots) const {
  if (free_slots.empty()) throw Error("SlotReuse::choose: no free slot");
  Choice best;
  uint64_t best_used = 0;
  for (int32_t slot : free_slots) {
    const Slot& s = slots_.at(static_cast<size_t>(slot));
    const int64_t reuse = enabled_ ? reusable(s, prompt) : 0;
    if (best.slot < 0 || reuse > best.reuse || (reuse == best.reuse && s.last_used < best_used)) {
      best = {slot, reuse};
      best_used = s.last_used;
    }
  }
  return best;
}

void SlotReuse::ended(int32_t slot, std::vector<int32_t> tokens, int64_t fed) {
  Slot& s = slots_.at(static_cast<size_t>(slot));
  s.last_used = ++clock_;
  if (fed < 0 || static_cast<size_t>(fed) > tokens.size()) {
    s.tokens.clear();
    return;
  }
  tokens.resize(static_cast<size_t>(fed));
  s.tokens = std::move(tokens);
}

void SlotReuse::forget(int32_t slot) { slots_.at(static_cast<size_t>(slot)).tokens.clear(); }

std::span<const int32_t> SlotReuse::tokens(int32_t slot) const { return slots_.at(static_cast<size_t>(slot)).tokens; }

} // namespace ninfer::serving
