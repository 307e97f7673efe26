// GPT-2's byte-level alphabet: every byte is written as one printable Unicode character so that
// a vocabulary of strings can cover arbitrary bytes. Bytes that are already printable
// (33..126, 161..172, 174..255) stand for themselves; the other 68 are moved, in byte order, to
// U+0100 onwards (so a space is "Ġ" U+0120 and a newline "Ċ" U+010A).
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace ninfer::tokenizer_detail {

class ByteLevelAlphabet {
 public:
  ByteLevelAlphabet();

  // The UTF-8 text of the character that stands for byte `b`.
  const std::string& symbol(unsigned char b) const { return symbol_[b]; }

  // Appends the bytes a vocabulary token stands for. Returns false (appending nothing) when the
  // token holds a character outside the alphabet: the caller then uses the token's own bytes,
  // as Hugging Face's ByteLevel decoder does.
  bool append_bytes(std::string_view token, std::string& out) const;

 private:
  std::array<std::string, 256> symbol_;
  std::array<int, 0x144> byte_of_;  // code point -> byte, -1 when not in the alphabet
};

const ByteLevelAlphabet& byte_level_alphabet();

} // namespace ninfer::tokenizer_detail
