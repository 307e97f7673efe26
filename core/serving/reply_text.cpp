#include "ninfer/serving/reply_text.hpp"

#include "ninfer/tokenizer/tokenizer.hpp"

namespace ninfer::serving {

ReplyText::ReplyText(const Tokenizer* tokenizer, std::vector<std::string> stop_strings,
                     std::optional<ReasoningMarkers> markers, std::span<const int32_t> prompt)
    : matcher_(std::move(stop_strings)) {
  // As in generate(): ids without text (padded vocabularies) contribute nothing.
  if (tokenizer) decoder_.emplace(*tokenizer, DecodeOptions{false, true});
  if (!markers || !decoder_) return;
  markers_ = markers;
  for (auto it = prompt.rbegin(); it != prompt.rend(); ++it) {
    if (*it == markers_->close) break;
    if (*it == markers_->open) {
      in_reasoning_ = strip_newlines_ = true;
      break;
    }
  }
}

std::string ReplyText::shape(std::string text) {
  if (strip_newlines_) {
    const size_t keep = text.find_first_not_of('\n');
    text.erase(0, keep == std::string::npos ? text.size() : keep);
    if (!text.empty()) strip_newlines_ = false;
  }
  if (in_reasoning_ && !text.empty()) {
    // Trailing newlines wait: they are dropped if the close marker comes next.
    text.insert(0, held_newlines_);
    const size_t end = text.find_last_not_of('\n');
    held_newlines_ = text.substr(end + 1);
    text.erase(end + 1);
  }
  return text;
}

ReplyText::Out ReplyText::take(StopMatcher::Step m, std::string flushed) {
  Out out{std::move(m.emit) + flushed, in_reasoning_, m.stopped};
  (in_reasoning_ ? reasoning_ : answer_) += out.text;
  return out;
}

ReplyText::Out ReplyText::release() {
  if (!decoder_ || matcher_.stopped()) return Out{{}, in_reasoning_, false};
  StopMatcher::Step m = matcher_.feed(shape(decoder_->finish()));
  std::string flushed = m.stopped ? std::string() : matcher_.flush();
  return take(std::move(m), std::move(flushed));
}

ReplyText::Out ReplyText::push(int32_t token) {
  if (markers_ && (token == markers_->open || token == markers_->close)) {
    // A marker ends one part and starts the other; it is not text of either.
    Out out = release();
    held_newlines_.clear();
    in_reasoning_ = token == markers_->open;
    strip_newlines_ = true;
    return out;
  }
  if (!decoder_) return {};
  return take(matcher_.feed(shape(decoder_->push(token))));
}

ReplyText::Out ReplyText::finish() { return release(); }

} // namespace ninfer::serving
