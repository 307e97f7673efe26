#include "random_text.hpp"

#include <fmt/format.h>

#include <array>
#include <string_view>
#include <vector>

namespace ninfer::test {

namespace {

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

struct Range {
  char32_t first, last;
};

// Letters and marks of several scripts; all assigned since Unicode 6, so regex engines built on
// different Unicode versions agree about them.
constexpr std::array<Range, 14> kScriptRanges{{
    {0x00C0, 0x00FF},    // Latin-1 letters (and × ÷)
    {0x0100, 0x017F},    // Latin Extended-A
    {0x0391, 0x03A9},    // Greek capitals
    {0x0410, 0x044F},    // Cyrillic
    {0x05D0, 0x05EA},    // Hebrew
    {0x0621, 0x064A},    // Arabic letters
    {0x0900, 0x0963},    // Devanagari, with its combining vowel signs
    {0x0E01, 0x0E3A},    // Thai, with combining marks
    {0x3041, 0x3096},    // Hiragana
    {0x30A1, 0x30FA},    // Katakana
    {0x4E00, 0x9FA5},    // CJK ideographs
    {0xAC00, 0xD7A3},    // Hangul syllables
    {0xFF01, 0xFF5E},    // full-width forms
    {0x1F300, 0x1F64F},  // emoji
}};

constexpr std::array<std::string_view, 22> kWhitespace{
    " ",  "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", " \n", "\n ", "\v", "\f",
    "\xC2\xA0",       // U+00A0 no-break space
    "\xE3\x80\x80",   // U+3000 ideographic space
    "\xE2\x80\x89",   // U+2009 thin space
    "\xE2\x80\xA8",   // U+2028 line separator
    "\xC2\x85",       // U+0085 next line
    "\xE2\x80\x8B",   // U+200B zero-width space (not whitespace)
    "\t\t", "    ", " \t ", "\n\n\n"};

constexpr std::array<std::string_view, 16> kContractions{"'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S",
                                                        "'LL", "'Re", "'x", "'", "''", "n't", "'ss", "’s"};

constexpr std::array<std::string_view, 12> kSpecial{"<|im_start|>", "<|im_end|>",  "<|endoftext|>", "<think>",
                                                    "</think>",     "<tool_call>", "</tool_call>",  "<|im_start|",
                                                    "<think",       "<|im_end>",   "< think>",      "<<think>>"};

// Sequences NFC changes: base letter + combining accent, decomposed Hangul, and singletons.
constexpr std::array<std::string_view, 8> kDecomposed{
    "e\xCC\x81",                  // e + U+0301 -> é
    "A\xCC\x8A",                  // A + U+030A -> Å
    "n\xCC\x83",                  // n + U+0303 -> ñ
    "\xE1\x84\x80\xE1\x85\xA1",   // U+1100 U+1161 -> U+AC00
    "\xE2\x84\xAB",               // U+212B ANGSTROM SIGN -> U+00C5
    "o\xCC\x88\xCC\x81",          // o + two marks
    "\xCC\x81",                   // a lone combining mark
    "\xE2\x84\xA6"};              // U+2126 OHM SIGN -> U+03A9

constexpr std::array<std::string_view, 10> kEmojiSequences{
    "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",                                  // thumbs up + skin tone
    "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7",  // family (ZWJ)
    "\xE2\x9D\xA4\xEF\xB8\x8F",                                          // heart + VS16
    "\xF0\x9F\x87\xAF\xF0\x9F\x87\xB5",                                  // flag JP
    "1\xEF\xB8\x8F\xE2\x83\xA3",                                         // keycap 1
    "\xF0\x9F\x98\x80", "\xF0\x9F\x8E\x89", "\xE2\x9C\x85", "\xE2\x98\x95", "\xF0\x9F\xA4\x96"};

constexpr std::array<std::string_view, 8> kNumbers{"\xD9\xA1\xD9\xA2\xD9\xA3",  // Arabic-Indic 123
                                                   "\xC2\xBD",                  // ½
                                                   "\xC2\xB2",                  // ²
                                                   "\xE2\x85\xAB",              // Ⅻ
                                                   "\xEF\xBC\x91\xEF\xBC\x92",  // full-width 12
                                                   "3.14", "1,000", "-42"};

constexpr std::string_view kPunctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

template <class T>
const auto& pick(std::mt19937_64& rng, const T& options) {
  return options[std::uniform_int_distribution<size_t>(0, options.size() - 1)(rng)];
}

int uniform(std::mt19937_64& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

std::string ascii_word(std::mt19937_64& rng) {
  std::string w;
  const int n = uniform(rng, 1, 12);
  const int style = uniform(rng, 0, 3);  // lower, Capitalised, UPPER, MiXeD
  for (int i = 0; i < n; ++i) {
    const bool upper = style == 2 || (style == 1 && i == 0) || (style == 3 && uniform(rng, 0, 1));
    w += static_cast<char>((upper ? 'A' : 'a') + uniform(rng, 0, 25));
  }
  return w;
}

std::string script_run(std::mt19937_64& rng) {
  const Range r = pick(rng, kScriptRanges);
  std::string s;
  const int n = uniform(rng, 1, 6);
  for (int i = 0; i < n; ++i) append_utf8(std::uniform_int_distribution<uint32_t>(r.first, r.last)(rng), s);
  return s;
}

std::string fragment(std::mt19937_64& rng, bool special_tokens) {
  switch (uniform(rng, 0, 11)) {
    case 0: case 1: case 2: return ascii_word(rng);
    case 3: return pick(rng, kWhitespace).data();
    case 4: return " " + ascii_word(rng);
    case 5: return std::to_string(std::uniform_int_distribution<uint64_t>(0, 1'000'000'000)(rng));
    case 6: {
      std::string p;
      for (int i = uniform(rng, 1, 3); i > 0; --i) p += pick(rng, kPunctuation);
      return p;
    }
    case 7: return std::string(pick(rng, kContractions));
    case 8: return script_run(rng);
    case 9: return std::string(uniform(rng, 0, 1) ? pick(rng, kDecomposed) : pick(rng, kNumbers));
    case 10: return std::string(pick(rng, kEmojiSequences));
    default: return special_tokens ? std::string(pick(rng, kSpecial)) : ascii_word(rng);
  }
}

} // namespace

std::string random_text(std::mt19937_64& rng, const RandomTextOptions& options) {
  std::string text;
  const int n = uniform(rng, options.min_fragments, options.max_fragments);
  for (int i = 0; i < n; ++i) text += fragment(rng, options.special_tokens);
  return text;
}

std::string random_multibyte_text(std::mt19937_64& rng, int characters) {
  std::string text;
  for (int i = 0; i < characters; ++i) {
    const Range r = pick(rng, kScriptRanges);
    append_utf8(std::uniform_int_distribution<uint32_t>(r.first, r.last)(rng), text);
  }
  return text;
}

std::string escaped(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7F && c != '\\')
      out += static_cast<char>(c);
    else
      out += fmt::format("\\x{:02X}", c);
  }
  return out;
}

} // namespace ninfer::test
