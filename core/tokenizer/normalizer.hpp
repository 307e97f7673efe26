// The tokenizer's normaliser. Qwen's tokenizer.json asks for Unicode NFC; it is done with ICU
// when the build found it (Debian: libicu-dev). Text that is pure ASCII is already NFC and is
// passed through without a copy into UTF-16.
#pragma once

#include <string>
#include <string_view>

namespace ninfer::tokenizer_detail {

enum class Normalization { none, nfc };

// Whether this build can apply NFC (false when ICU was not found at configure time).
bool nfc_available();

// Returns `text` (valid UTF-8) normalised as asked. Without ICU, NFC passes text through
// unchanged and warns once.
std::string normalize(std::string_view text, Normalization form);

} // namespace ninfer::tokenizer_detail
