// When generation stops: a stop token id, or a stop string in the decoded text. Stop strings
// are matched incrementally on streamed text, so the streamer must hold back any tail that
// could be the start of a stop string until it knows.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "ninfer/sampling/sampling_params.hpp"

namespace ninfer {

struct StopConditions {
  std::unordered_set<TokenId> token_ids; // e.g. the model's eos ids; the token is not emitted
  std::vector<std::string> strings;      // matched on decoded text; not emitted

  bool is_stop_token(TokenId id) const { return token_ids.count(id) != 0; }
};

// Matches stop strings on text that arrives in chunks. The result does not depend on how the
// text is split: the stop is the occurrence that ends first (of those, the one that starts
// first), and everything before it is emitted. Bytes are compared, so chunks must be whole
// UTF-8 sequences (the tokenizer's streaming decoder guarantees that); then emitted text is
// whole UTF-8 too, because a held-back tail starts where a stop string starts.
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stop_strings); // empty strings are ignored

  struct Step {
    std::string emit;                  // text that is now safe to show
    bool stopped = false;              // a stop string was found; feed no more
    std::optional<std::string> match;  // which one
    size_t held_back = 0;              // bytes withheld (could start a stop string)
  };

  // Feeds the next chunk of decoded text. After a stop, further chunks are ignored.
  Step feed(std::string_view chunk);
  // Generation ended without a stop string: the withheld text, which is now safe.
  std::string flush();

  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_; // withheld tail: a proper prefix of some stop string
  bool stopped_ = false;
};

} // namespace ninfer
