// Finding added tokens (<|im_start|>, <think>, ...) in text before it is pre-tokenised: each
// occurrence becomes its own id and the text between occurrences is tokenised normally. Where
// several tokens could match, the leftmost occurrence wins, and among those starting at the same
// place the longest, which is Hugging Face's rule.
#pragma once

#include <bitset>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::tokenizer_detail {

class AddedTokenMatcher {
 public:
  struct Token {
    std::string content;
    int32_t id;
  };
  explicit AddedTokenMatcher(std::vector<Token> tokens);

  // Calls `segment(text, id)` for each piece of `text` in order: id is set for an added token,
  // empty for plain text between tokens (never an empty piece).
  void split(std::string_view text,
             const std::function<void(std::string_view, std::optional<int32_t>)>& segment) const;

 private:
  std::vector<Token> tokens_;         // longest first, so the first match at a place is the longest
  std::bitset<256> first_bytes_;      // bytes that can start a token: a cheap filter for the scan
};

} // namespace ninfer::tokenizer_detail
