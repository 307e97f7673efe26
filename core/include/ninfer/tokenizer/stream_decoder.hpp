// Decoding tokens one at a time as a model generates them. A token often ends in the middle of a
// multi-byte UTF-8 character (emoji, CJK text, byte-level BPE splits them freely), so the
// decoder holds such a partial character back until the bytes that complete it arrive: every
// string it returns is valid UTF-8, and the concatenation of everything it returns equals
// Tokenizer::decode of all the ids pushed.
#pragma once

#include <cstdint>
#include <string>

#include "ninfer/tokenizer/tokenizer.hpp"

namespace ninfer {

class StreamDecoder {
 public:
  // `tokenizer` must outlive the decoder.
  explicit StreamDecoder(const Tokenizer& tokenizer, DecodeOptions options = {});

  // Adds one token; returns the text it completes (possibly empty while a character is held).
  std::string push(int32_t id);
  // Ends the stream: a held partial character becomes U+FFFD (as decode does). The decoder can
  // then be used for a new stream.
  std::string finish();
  // Whether bytes of an incomplete character are being held back.
  bool has_pending() const { return !pending_.empty(); }

 private:
  const Tokenizer* tokenizer_;
  DecodeOptions options_;
  std::string pending_;  // at most 3 bytes: a valid prefix of one UTF-8 character
};

} // namespace ninfer
