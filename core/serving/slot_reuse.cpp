#include "ninfer/serving/slot_reuse.hpp"

#include <algorithm>

#include "ninfer/support/error.hpp"

namespace ninfer::serving {

SlotReuse::SlotReuse(int32_t slots, bool rewindable, bool enabled)
    : slots_(static_cast<size_t>(std::max(slots, 0))), rewindable_(rewindable), enabled_(enabled) {}

namespace {

size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  return static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
}

} // namespace

SlotReuse::Choice SlotReuse::reusable(const Slot& s, std::span<const int32_t> prompt) const {
  // At least one prompt token is read afresh: its logits give the first generated token.
  const size_t most = prompt.empty() ? 0 : prompt.size() - 1;
  const size_t common = common_prefix(s.tokens, prompt);
  if (rewindable_) return {-1, static_cast<int64_t>(std::min(common, most)), false};
  // A recurrent state covers all of the slot's tokens, or all of its snapshot's.
  if (common == s.tokens.size() && common > 0 && common <= most) return {-1, static_cast<int64_t>(common), false};
  if (!s.snapshot.empty() && s.snapshot.size() <= most && common_prefix(s.snapshot, prompt) == s.snapshot.size())
    return {-1, static_cast<int64_t>(s.snapshot.size()), true};
  return {};
}

SlotReuse::Choice SlotReuse::choose(std::span<const int32_t> prompt, std::span<const int32_t> free_slots) const {
  if (free_slots.empty()) throw Error("SlotReuse::choose: no free slot");
  Choice best;
  uint64_t best_used = 0;
  for (int32_t slot : free_slots) {
    const Slot& s = slots_.at(static_cast<size_t>(slot));
    Choice c = enabled_ ? reusable(s, prompt) : Choice{};
    c.slot = slot;
    if (best.slot < 0 || c.reuse > best.reuse || (c.reuse == best.reuse && s.last_used < best_used)) {
      best = c;
      best_used = s.last_used;
    }
  }
  return best;
}

void SlotReuse::ended(int32_t slot, std::vector<int32_t> tokens, int64_t fed, int64_t snapshot) {
  Slot& s = slots_.at(static_cast<size_t>(slot));
  s.last_used = ++clock_;
  s.snapshot.clear();
  if (snapshot > 0 && snapshot <= fed && static_cast<size_t>(snapshot) <= tokens.size())
    s.snapshot.assign(tokens.begin(), tokens.begin() + snapshot);
  if (fed < 0 || static_cast<size_t>(fed) > tokens.size()) {
    s.tokens.clear();
    return;
  }
  tokens.resize(static_cast<size_t>(fed));
  s.tokens = std::move(tokens);
}

void SlotReuse::forget(int32_t slot) {
  Slot& s = slots_.at(static_cast<size_t>(slot));
  s.tokens.clear();
  s.snapshot.clear();
}

std::span<const int32_t> SlotReuse::tokens(int32_t slot) const { return slots_.at(static_cast<size_t>(slot)).tokens; }

} // namespace ninfer::serving
