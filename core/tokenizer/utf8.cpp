#include "utf8.hpp"

namespace ninfer::tokenizer_detail {

namespace {

// Sequence length announced by a lead byte, 0 if it cannot start a sequence.
size_t lead_length(unsigned char b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;  // continuation byte, overlong lead (C0, C1) or beyond U+10FFFF (F5..FF)
}

// The second byte's range is narrower than 80..BF for some leads: it rules out overlong forms
// (E0, F0), surrogates (ED) and code points above U+10FFFF (F4). Unicode's "maximal subpart"
// rule says a lead followed by an out-of-range second byte is an invalid subpart of length 1.
bool second_byte_ok(unsigned char lead, unsigned char b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return b >= 0x80 && b <= 0xBF;
  }
}

bool is_continuation(unsigned char b) { return b >= 0x80 && b <= 0xBF; }

} // namespace

Utf8Step next_utf8(std::string_view bytes) {
  const auto lead = static_cast<unsigned char>(bytes[0]);
  const size_t need = lead_length(lead);
  if (need == 0) return {Utf8Step::invalid, 1};
  if (need == 1) return {Utf8Step::complete, 1};
  for (size_t i = 1; i < need; ++i) {
    if (i >= bytes.size()) return {Utf8Step::incomplete, i};
    const auto b = static_cast<unsigned char>(bytes[i]);
    const bool ok = i == 1 ? second_byte_ok(lead, b) : is_continuation(b);
    if (!ok) return {Utf8Step::invalid, i};
  }
  return {Utf8Step::complete, need};
}

std::optional<size_t> first_invalid_utf8(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    // ASCII runs are the common case; skip them without classifying.
    if (static_cast<unsigned char>(bytes[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const Utf8Step s = next_utf8(bytes.substr(pos));
    if (s.kind != Utf8Step::complete) return pos;
    pos += s.length;
  }
  return std::nullopt;
}

size_t append_lossy_utf8(std::string_view bytes, std::string& out, bool hold_incomplete) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    const Utf8Step s = next_utf8(bytes.substr(pos));
    if (s.kind == Utf8Step::complete) {
      out.append(bytes.substr(pos, s.length));
    } else if (s.kind == Utf8Step::incomplete && hold_incomplete) {
      return pos;
    } else {
      out.append(kReplacementChar);
    }
    pos += s.length;
  }
  return pos;
}

char32_t decode_code_point(std::string_view bytes, size_t length) {
  const auto b = [&](size_t i) { return static_cast<char32_t>(static_cast<unsigned char>(bytes[i])); };
  switch (length) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3: return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default: return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

} // namespace ninfer::tokenizer_detail
