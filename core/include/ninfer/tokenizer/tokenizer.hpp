// A Hugging Face byte-level BPE tokenizer (Qwen2/Qwen3/Qwen3.5 and others of the same kind),
// loaded from tokenizer.json. Encoding recognises added and special tokens written in the text
// (<|im_start|>, <think>, ...) and adds nothing (no BOS/EOS): callers build prompts as text.
//
// A Tokenizer is cheap to copy (copies share the loaded tables and the per-word cache) and safe
// to use from several threads at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer {

namespace tokenizer_detail {
struct TokenizerSpec;
}

struct DecodeOptions {
  // Leave out tokens marked "special" in tokenizer.json (<|im_end|>, <|endoftext|>, ...); tokens
  // that are added but not special (<think>, <tool_call>) are kept, as in Hugging Face.
  bool skip_special_tokens = false;
  // Leave out ids that have no token (a model's embedding is often padded past the tokenizer's
  // vocabulary) instead of throwing, as Hugging Face does.
  bool skip_unknown_ids = false;
};

struct AddedToken {
  int32_t id;
  std::string content;
  bool special;
};

class Tokenizer {
 public:
  // `path` is a tokenizer.json or a folder holding one. Throws ninfer::Error naming the file for
  // a missing file, malformed JSON, or a tokenizer kind this implementation does not support.
  static Tokenizer load(const std::filesystem::path& path);
  // Same, for the text of a tokenizer.json (`source` names it in messages).
  static Tokenizer from_json(const std::string& text, const std::string& source);

  // Text (UTF-8; invalid UTF-8 throws ninfer::Error naming the byte offset) -> token ids.
  std::vector<int32_t> encode(std::string_view text) const;

  // Token ids -> text. Byte sequences that are not valid UTF-8 (a multi-byte character cut by
  // the end of `ids`) become U+FFFD. An id with no token throws ninfer::Error unless
  // options.skip_unknown_ids.
  std::string decode(std::span<const int32_t> ids, DecodeOptions options = {}) const;

  // The raw bytes one token stands for (possibly part of a UTF-8 character): what the
  // streaming decoder and stop-string matching work on. Throws for an id with no token.
  std::string token_bytes(int32_t id) const;

  // One past the largest id (151669 for Qwen3: 151643 BPE tokens + 26 added tokens).
  int32_t vocab_size() const;
  // Whether `id` names a token (ids below vocab_size() may still be gaps in theory).
  bool has_token(int32_t id) const;
  bool is_special(int32_t id) const;

  // The id of a token written as in tokenizer.json: an added token's content ("<|im_end|>") or
  // a vocabulary entry in byte-level form ("Ġworld" for " world").
  std::optional<int32_t> token_id(std::string_view token) const;
  // As token_id, but a missing token throws ninfer::Error naming the tokenizer file.
  int32_t require_token_id(std::string_view token) const;

  const std::vector<AddedToken>& added_tokens() const;
  // The tokenizer.json this was loaded from.
  const std::string& source() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  static Tokenizer from_spec(tokenizer_detail::TokenizerSpec spec);
  std::shared_ptr<const Impl> impl_;
};

} // namespace ninfer
