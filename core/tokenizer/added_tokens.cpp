#include "added_tokens.hpp"

#include <algorithm>

namespace ninfer::tokenizer_detail {

AddedTokenMatcher::AddedTokenMatcher(std::vector<Token> tokens) : tokens_(std::move(tokens)) {
  std::stable_sort(tokens_.begin(), tokens_.end(),
                   [](const Token& a, const Token& b) { return a.content.size() > b.content.size(); });
  for (const Token& t : tokens_) first_bytes_.set(static_cast<unsigned char>(t.content[0]));
}

void AddedTokenMatcher::split(std::string_view text,
                              const std::function<void(std::string_view, std::optional<int32_t>)>& segment) const {
  size_t plain_start = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_bytes_.test(static_cast<unsigned char>(text[pos]))) {
      ++pos;
      continue;
    }
    const std::string_view rest = text.substr(pos);
    auto hit = std::find_if(tokens_.begin(), tokens_.end(),
                            [&](const Token& t) { return rest.substr(0, t.content.size()) == t.content; });
    if (hit == tokens_.end()) {
      ++pos;
      continue;
    }
    if (pos > plain_start) segment(text.substr(plain_start, pos - plain_start), std::nullopt);
    segment(rest.substr(0, hit->content.size()), hit->id);
    pos += hit->content.size();
    plain_start = pos;
  }
  if (plain_start < text.size()) segment(text.substr(plain_start), std::nullopt);
}

} // namespace ninfer::tokenizer_detail
