// Reading a Hugging Face tokenizer.json into plain data. Only what byte-level BPE tokenizers
// (Qwen, GPT-2, Llama 3 style) use is accepted; anything else is refused with an error that
// names the file and the key, so a tokenizer is never silently run with a step missing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "normalizer.hpp"

namespace ninfer::tokenizer_detail {

struct AddedTokenSpec {
  int32_t id;
  std::string content;
  bool special;
};

struct TokenizerSpec {
  std::string source;  // the file, for messages
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  bool ignore_merges = false;
  std::vector<AddedTokenSpec> added_tokens;
  Normalization normalization = Normalization::none;
  std::vector<std::string> split_patterns;  // applied in order, each to the previous one's pieces
};

// Token ids size the id -> token tables, so they are bounded before anything is allocated
// (the largest vocabularies in use hold about 262,000 tokens).
inline constexpr int64_t kTokenIdLimit = int64_t{1} << 22;  // ids are below 4,194,304
inline constexpr uint64_t kMaxTokenizerFileBytes = uint64_t{256} << 20;
inline constexpr int kMaxTokenizerJsonDepth = 64;

// `path` is a tokenizer.json file or a folder that holds one.
TokenizerSpec read_tokenizer_file(const std::filesystem::path& path);
// The same for the text of a file (`source` names it in messages).
TokenizerSpec read_tokenizer_text(const std::string& text, const std::string& source);

} // namespace ninfer::tokenizer_detail
