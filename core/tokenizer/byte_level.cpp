#include "byte_level.hpp"

#include "utf8.hpp"

namespace ninfer::tokenizer_detail {

namespace {

bool stands_for_itself(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; }

} // namespace

ByteLevelAlphabet::ByteLevelAlphabet() {
  byte_of_.fill(-1);
  char32_t next_moved = 0x100;
  for (int b = 0; b < 256; ++b) {
    const char32_t cp = stands_for_itself(b) ? static_cast<char32_t>(b) : next_moved++;
    append_utf8(cp, symbol_[b]);
    byte_of_[cp] = b;
  }
}

bool ByteLevelAlphabet::append_bytes(std::string_view token, std::string& out) const {
  const size_t start = out.size();
  size_t pos = 0;
  while (pos < token.size()) {
    const Utf8Step s = next_utf8(token.substr(pos));
    const char32_t cp = s.kind == Utf8Step::complete ? decode_code_point(token.substr(pos), s.length) : 0xFFFF;
    if (cp >= byte_of_.size() || byte_of_[cp] < 0) {
      out.resize(start);
      return false;
    }
    out.push_back(static_cast<char>(byte_of_[cp]));
    pos += s.length;
  }
  return true;
}

const ByteLevelAlphabet& byte_level_alphabet() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

} // namespace ninfer::tokenizer_detail
