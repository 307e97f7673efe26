#include "normalizer.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>

#include "ninfer/support/error.hpp"

#if NINFER_TOKENIZER_WITH_ICU
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <vector>
#endif

namespace ninfer::tokenizer_detail {

namespace {

bool is_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

#if NINFER_TOKENIZER_WITH_ICU
void check(UErrorCode status, const char* step) {
  if (U_FAILURE(status)) throw Error(fmt::format("NFC normalisation failed in {}: {}", step, u_errorName(status)));
}

std::string icu_nfc(std::string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const UNormalizer2* nfc = unorm2_getNFCInstance(&status);
  check(status, "unorm2_getNFCInstance");

  // UTF-8 -> UTF-16 (never longer in code units than the byte count).
  std::vector<UChar> utf16(text.size() + 1);
  int32_t utf16_len = 0;
  u_strFromUTF8(utf16.data(), static_cast<int32_t>(utf16.size()), &utf16_len, text.data(),
                static_cast<int32_t>(text.size()), &status);
  check(status, "u_strFromUTF8");

  // Most text is already NFC: the quick span check avoids normalising it.
  const int32_t normal_prefix = unorm2_spanQuickCheckYes(nfc, utf16.data(), utf16_len, &status);
  check(status, "unorm2_spanQuickCheckYes");
  if (normal_prefix == utf16_len) return std::string(text);

  // NFC can grow a string (up to 3x in UTF-16 code units in the worst case).
  std::vector<UChar> normalized(static_cast<size_t>(utf16_len) * 3 + 16);
  const int32_t normalized_len = unorm2_normalize(nfc, utf16.data(), utf16_len, normalized.data(),
                                                  static_cast<int32_t>(normalized.size()), &status);
  check(status, "unorm2_normalize");

  std::string out(static_cast<size_t>(normalized_len) * 3, '\0');
  int32_t out_len = 0;
  u_strToUTF8(out.data(), static_cast<int32_t>(out.size()), &out_len, normalized.data(), normalized_len, &status);
  check(status, "u_strToUTF8");
  out.resize(static_cast<size_t>(out_len));
  return out;
}
#endif

} // namespace

bool nfc_available() { return NINFER_TOKENIZER_WITH_ICU != 0; }

std::string normalize(std::string_view text, Normalization form) {
  if (form == Normalization::none || is_ascii(text)) return std::string(text);
#if NINFER_TOKENIZER_WITH_ICU
  return icu_nfc(text);
#else
  // Without ICU, text that is already NFC (nearly all text, and everything a model generates)
  // still tokenises exactly; decomposed input may not. Say so once rather than refuse all
  // non-ASCII text.
  static std::once_flag warned;
  std::call_once(warned, [] {
    spdlog::warn("this ninfer build has no ICU, so the tokenizer's NFC normaliser is skipped: text in decomposed "
                 "Unicode form may tokenise differently from Hugging Face; install libicu-dev and rebuild");
  });
  return std::string(text);
#endif
}

} // namespace ninfer::tokenizer_detail
