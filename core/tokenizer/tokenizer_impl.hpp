// The loaded tables behind ninfer::Tokenizer (private to the tokenizer module).
#pragma once

#include <string>
#include <vector>

#include "added_tokens.hpp"
#include "bpe.hpp"
#include "ninfer/tokenizer/tokenizer.hpp"
#include "normalizer.hpp"
#include "regex_split.hpp"

namespace ninfer {

struct Tokenizer::Impl {
  enum class Kind : uint8_t { none, vocab, added, special };

  std::string source;
  tokenizer_detail::BpeModel bpe;
  tokenizer_detail::AddedTokenMatcher added_matcher;
  std::vector<tokenizer_detail::RegexSplitter> splitters;
  tokenizer_detail::Normalization normalization;
  std::vector<AddedToken> added;
  std::vector<std::string> token_of_id;  // vocabulary entries in byte-level form, added tokens as written
  std::vector<Kind> kind_of_id;

  // Appends the ids of plain text (no added tokens in it).
  void encode_plain(std::string_view text, std::vector<int32_t>& out) const;
  // Splits with splitters[level..] and hands the final pieces to the BPE model.
  void split_and_merge(std::string_view text, size_t level, std::vector<int32_t>& out) const;
  // Appends the bytes of one id; returns false (appending nothing) for a skipped id.
  bool append_bytes(int32_t id, std::string& out, const DecodeOptions& options) const;
};

} // namespace ninfer
