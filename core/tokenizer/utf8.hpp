// UTF-8 scanning shared by the encoder (which rejects invalid text) and the decoders (which,
// like Hugging Face's `from_utf8_lossy`, replace each maximal invalid subpart with U+FFFD).
// Keeping one classifier means the streaming decoder and the whole-sequence decoder cannot
// disagree about where a replacement character goes.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ninfer::tokenizer_detail {

// What the bytes at the start of a buffer are.
struct Utf8Step {
  enum Kind {
    complete,    // a whole valid code point of `length` bytes
    invalid,     // a maximal invalid subpart of `length` bytes (one U+FFFD)
    incomplete,  // a valid prefix of a code point that the buffer ends inside
  };
  Kind kind;
  size_t length;
};

// `bytes` must be non-empty.
Utf8Step next_utf8(std::string_view bytes);

// Byte offset of the first invalid or truncated sequence, or nullopt when all of it is valid.
std::optional<size_t> first_invalid_utf8(std::string_view bytes);

// Appends `bytes` to `out`, replacing invalid subparts with U+FFFD. With hold_incomplete, a
// truncated sequence at the end is left unconsumed (a later byte may complete it); otherwise it
// becomes U+FFFD too. Returns how many bytes were consumed.
size_t append_lossy_utf8(std::string_view bytes, std::string& out, bool hold_incomplete);

// The code point starting at `bytes` (must be a complete valid sequence of `length` bytes).
char32_t decode_code_point(std::string_view bytes, size_t length);

// Appends the UTF-8 encoding of a code point.
void append_utf8(char32_t cp, std::string& out);

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

} // namespace ninfer::tokenizer_detail
