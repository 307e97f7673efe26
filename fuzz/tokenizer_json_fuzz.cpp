// A tokenizer.json's text through the tokenizer loader (streaming parse, limits, vocabulary,
// merges, added tokens, split patterns) and, when it loads, encoding and decoding a few
// texts with it. Only ninfer::Error may come out.
#include <cstdint>

#include "fuzz_support.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/tokenizer/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ninfer;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const Tokenizer tok = Tokenizer::from_json(text, "fuzz/tokenizer.json");
    for (const char* s : {"Hello, world! 123", "<|im_start|>user\nhi<|im_end|>", "  \xC3\xA9t\xC3\xA9 \xE4\xB8\xAD\xE6\x96\x87",
                          "a"}) {
      const auto ids = tok.encode(s);
      tok.decode(ids, DecodeOptions{false, true});
    }
  } catch (const Error&) {
  } catch (const std::exception& e) {
    fuzz::unexpected("tokenizer_json", e);
  }
  return 0;
}
