#include <algorithm>

#include "ninfer/sampling/stop.hpp"

namespace ninfer {

StopMatcher::StopMatcher(std::vector<std::string> stop_strings) {
  for (auto& s : stop_strings)
    if (!s.empty()) stops_.push_back(std::move(s));
}

StopMatcher::Step StopMatcher::feed(std::string_view chunk) {
  Step step;
  if (stopped_) {
    step.stopped = true;
    return step;
  }
  std::string text = pending_;
  text.append(chunk);
  pending_.clear();

  // `text` holds no complete stop string before this chunk (we would have stopped), so any
  // occurrence is new. The one that ends first is the one a character-by-character stream
  // would have hit first; on equal ends, the longer one (it starts first).
  size_t best_start = std::string::npos, best_end = std::string::npos;
  const std::string* best = nullptr;
  for (const auto& s : stops_) {
    const size_t pos = text.find(s);
    if (pos == std::string::npos) continue;
    const size_t end = pos + s.size();
    if (!best || end < best_end || (end == best_end && pos < best_start)) {
      best = &s;
      best_start = pos;
      best_end = end;
    }
  }
  if (best) {
    stopped_ = true;
    step.stopped = true;
    step.match = *best;
    step.emit = text.substr(0, best_start);
    return step;
  }

  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stops_) {
    for (size_t len = std::min(s.size() - 1, text.size()); len > hold; --len) {
      if (text.compare(text.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  step.emit = text.substr(0, text.size() - hold);
  pending_ = text.substr(text.size() - hold);
  step.held_back = hold;
  return step;
}

std::string StopMatcher::flush() {
  std::string out;
  if (!stopped_) out.swap(pending_);
  return out;
}

} // namespace ninfer
