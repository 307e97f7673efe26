#include "ninfer/tokenizer/tokenizer.hpp"

#include <fmt/format.h>

#include "byte_level.hpp"
#include "ninfer/support/error.hpp"
#include "tokenizer_file.hpp"
#include "tokenizer_impl.hpp"
#include "utf8.hpp"

namespace ninfer {

using namespace tokenizer_detail;

namespace {

std::vector<AddedTokenMatcher::Token> matcher_tokens(const std::vector<AddedTokenSpec>& added) {
  std::vector<AddedTokenMatcher::Token> tokens;
  for (const auto& a : added) tokens.push_back({a.content, a.id});
  return tokens;
}

std::vector<RegexSplitter> compile_splitters(const TokenizerSpec& spec) {
  std::vector<RegexSplitter> splitters;
  for (const auto& pattern : spec.split_patterns) splitters.emplace_back(pattern, spec.source + ": pre_tokenizer");
  return splitters;
}

} // namespace

Tokenizer Tokenizer::load(const std::filesystem::path& path) { return from_spec(read_tokenizer_file(path)); }

Tokenizer Tokenizer::from_json(const std::string& text, const std::string& source) {
  return from_spec(read_tokenizer_text(text, source));
}

Tokenizer Tokenizer::from_spec(TokenizerSpec spec) {

  int32_t size = 0;
  for (const auto& [token, id] : spec.vocab) size = std::max(size, id + 1);
  for (const auto& a : spec.added_tokens) size = std::max(size, a.id + 1);
  std::vector<std::string> token_of_id(size);
  std::vector<Impl::Kind> kind_of_id(size, Impl::Kind::none);
  for (const auto& [token, id] : spec.vocab) {
    if (kind_of_id[id] != Impl::Kind::none)
      throw Error(fmt::format("{}: model.vocab gives id {} to both '{}' and '{}'", spec.source, id, token_of_id[id], token));
    token_of_id[id] = token;
    kind_of_id[id] = Impl::Kind::vocab;
  }
  std::vector<AddedToken> added;
  for (const auto& a : spec.added_tokens) {
    // An added token may re-declare a vocabulary entry; its own content wins when decoding.
    token_of_id[a.id] = a.content;
    kind_of_id[a.id] = a.special ? Impl::Kind::special : Impl::Kind::added;
    added.push_back({a.id, a.content, a.special});
  }

  // Built in place: the BPE model owns a mutex, so Impl cannot be moved.
  std::shared_ptr<const Impl> impl(new Impl{
      spec.source,
      BpeModel(std::move(spec.vocab), spec.merges, spec.ignore_merges, spec.source),
      AddedTokenMatcher(matcher_tokens(spec.added_tokens)),
      compile_splitters(spec),
      spec.normalization,
      std::move(added),
      std::move(token_of_id),
      std::move(kind_of_id),
  });
  return Tokenizer(std::move(impl));
}

void Tokenizer::Impl::split_and_merge(std::string_view text, size_t level, std::vector<int32_t>& out) const {
  if (level == splitters.size()) {
    bpe.encode_word(text, out);
    return;
  }
  splitters[level].split(text, [&](std::string_view piece) { split_and_merge(piece, level + 1, out); });
}

void Tokenizer::Impl::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
  const std::string normalized = normalize(text, normalization);
  split_and_merge(normalized, 0, out);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  if (auto bad = first_invalid_utf8(text))
    throw Error(fmt::format("cannot tokenize: the text is not valid UTF-8 at byte {} (of {})", *bad, text.size()));
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  impl_->added_matcher.split(text, [&](std::string_view piece, std::optional<int32_t> added_id) {
    if (added_id)
      ids.push_back(*added_id);
    else
      impl_->encode_plain(piece, ids);
  });
  return ids;
}

bool Tokenizer::Impl::append_bytes(int32_t id, std::string& out, const DecodeOptions& options) const {
  if (id < 0 || id >= static_cast<int32_t>(kind_of_id.size()) || kind_of_id[id] == Kind::none) {
    if (options.skip_unknown_ids) return false;
    throw Error(fmt::format("token id {} is not in the tokenizer's vocabulary (ids 0..{} of {})", id,
                            static_cast<int64_t>(kind_of_id.size()) - 1, source));
  }
  switch (kind_of_id[id]) {
    case Kind::special:
      if (options.skip_special_tokens) return false;
      [[fallthrough]];
    case Kind::added:
      out += token_of_id[id];
      return true;
    default:
      if (!byte_level_alphabet().append_bytes(token_of_id[id], out)) out += token_of_id[id];
      return true;
  }
}

std::string Tokenizer::decode(std::span<const int32_t> ids, DecodeOptions options) const {
  std::string bytes;
  for (int32_t id : ids) impl_->append_bytes(id, bytes, options);
  std::string text;
  text.reserve(bytes.size());
  append_lossy_utf8(bytes, text, /*hold_incomplete=*/false);
  return text;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  std::string bytes;
  impl_->append_bytes(id, bytes, DecodeOptions{});
  return bytes;
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->kind_of_id.size()); }

bool Tokenizer::has_token(int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->kind_of_id[id] != Impl::Kind::none;
}

bool Tokenizer::is_special(int32_t id) const { return has_token(id) && impl_->kind_of_id[id] == Impl::Kind::special; }

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  for (const auto& a : impl_->added)
    if (a.content == token) return a.id;
  const auto& vocab = impl_->bpe.vocab();
  if (auto it = vocab.find(std::string(token)); it != vocab.end()) return it->second;
  return std::nullopt;
}

int32_t Tokenizer::require_token_id(std::string_view token) const {
  if (auto id = token_id(token)) return *id;
  throw Error(fmt::format("{} has no token '{}'; this tokenizer does not look like a Qwen (ChatML) one", impl_->source,
                          token));
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added; }

const std::string& Tokenizer::source() const { return impl_->source; }

} // namespace ninfer
