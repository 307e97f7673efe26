#include "ninfer/tokenizer/stream_decoder.hpp"

#include "utf8.hpp"

namespace ninfer {

using tokenizer_detail::append_lossy_utf8;

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, DecodeOptions options)
    : tokenizer_(&tokenizer), options_(options) {}

std::string StreamDecoder::push(int32_t id) {
  if (!tokenizer_->has_token(id) && options_.skip_unknown_ids) return {};
  if (options_.skip_special_tokens && tokenizer_->is_special(id)) return {};
  pending_ += tokenizer_->token_bytes(id);
  std::string text;
  const size_t consumed = append_lossy_utf8(pending_, text, /*hold_incomplete=*/true);
  pending_.erase(0, consumed);
  return text;
}

std::string StreamDecoder::finish() {
  std::string text;
  append_lossy_utf8(pending_, text, /*hold_incomplete=*/false);
  pending_.clear();
  return text;
}

} // namespace ninfer
