// The pre-tokenizer's "Split" step: a regular expression (Unicode-aware, via PCRE2 in UTF + UCP
// mode, JIT-compiled) cuts normalised text into pre-tokens. With the "Isolated" behaviour every
// match is a pre-token and so is every stretch of text between matches.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace ninfer::tokenizer_detail {

class RegexSplitter {
 public:
  // `where` names the file and key in error messages (a pattern PCRE2 cannot compile).
  RegexSplitter(const std::string& pattern, const std::string& where);
  ~RegexSplitter();
  RegexSplitter(RegexSplitter&&) noexcept;
  RegexSplitter& operator=(RegexSplitter&&) noexcept;

  // Calls `piece` for each pre-token of `text` (valid UTF-8), in order; they tile the text.
  void split(std::string_view text, const std::function<void(std::string_view)>& piece) const;

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
  std::string where_;
};

// Hugging Face's ByteLevel pre-tokenizer with use_regex=true applies GPT-2's split.
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

} // namespace ninfer::tokenizer_detail
