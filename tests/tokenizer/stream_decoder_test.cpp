// The streaming decoder never hands out a broken UTF-8 sequence, holds back no more than the
// incomplete character, and adds up to exactly what whole-sequence decoding gives.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "ninfer/support/error.hpp"
#include "ninfer/tokenizer/stream_decoder.hpp"
#include "ninfer/tokenizer/tokenizer.hpp"
#include "qwen3_tokenizer.hpp"
#include "random_text.hpp"
#include "test_support.hpp"

namespace {

using namespace ninfer;

// nlohmann::json refuses to serialise invalid UTF-8: an independent validity check.
bool valid_utf8(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

// The token that stands for each single byte, found by asking the tokenizer for every token's
// bytes (so the test does not depend on knowing the byte-level alphabet).
const std::map<unsigned char, int32_t>& byte_tokens() {
  static const std::map<unsigned char, int32_t> tokens = [] {
    std::map<unsigned char, int32_t> m;
    const Tokenizer& tok = test::qwen3_tokenizer();
    for (int32_t id = 0; id < tok.vocab_size(); ++id) {
      if (tok.is_special(id)) continue;
      const std::string b = tok.token_bytes(id);
      if (b.size() == 1) m.emplace(static_cast<unsigned char>(b[0]), id);
    }
    return m;
  }();
  return tokens;
}

// Ids whose bytes concatenate to `bytes`, cut at random places: valid pieces sometimes go through
// the BPE encoder (multi-byte tokens), otherwise one token per byte (splitting characters).
std::vector<int32_t> random_token_cover(const std::string& bytes, std::mt19937_64& rng) {
  const Tokenizer& tok = test::qwen3_tokenizer();
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos < bytes.size()) {
    const size_t len = std::min(bytes.size() - pos, std::uniform_int_distribution<size_t>(1, 7)(rng));
    const std::string piece = bytes.substr(pos, len);
    // encode() applies NFC, which changes a few characters (U+095C -> U+0921 U+093C): those
    // pieces go in byte by byte so the ids still spell `bytes` exactly.
    const bool encodable = valid_utf8(piece) && tok.decode(tok.encode(piece)) == piece;
    if (encodable && rng() % 2) {
      for (int32_t id : tok.encode(piece)) ids.push_back(id);
    } else {
      for (unsigned char b : piece) ids.push_back(byte_tokens().at(b));
    }
    pos += len;
  }
  return ids;
}

TEST(StreamDecoder, RandomSplitsOfMultibyteTextNeverEmitBrokenCharacters) {
  const Tokenizer& tok = test::qwen3_tokenizer();
  ASSERT_EQ(byte_tokens().size(), 256u);
  auto rng = test::fresh_rng("stream decoder splits");
  for (int round = 0; round < 200; ++round) {
    const std::string text = test::random_multibyte_text(rng, 1 + static_cast<int>(rng() % 40));
    const auto ids = random_token_cover(text, rng);

    StreamDecoder stream(tok);
    std::string emitted, pushed_bytes;
    for (int32_t id : ids) {
      const std::string piece = stream.push(id);
      ASSERT_TRUE(valid_utf8(piece)) << "broken UTF-8 emitted for text " << test::escaped(text);
      emitted += piece;
      pushed_bytes += tok.token_bytes(id);
      // All that may be held back is the start of the one character the bytes end inside.
      size_t complete = pushed_bytes.size();
      while (complete > 0 && complete < text.size() && (static_cast<unsigned char>(text[complete]) & 0xC0) == 0x80)
        --complete;
      ASSERT_EQ(emitted, text.substr(0, complete)) << "after " << pushed_bytes.size() << " bytes of "
                                                   << test::escaped(text);
      ASSERT_EQ(stream.has_pending(), complete < pushed_bytes.size());
    }
    EXPECT_EQ(emitted, text);
    EXPECT_FALSE(stream.has_pending());
    EXPECT_EQ(stream.finish(), "");
    EXPECT_EQ(tok.decode(ids), text);
  }
}

TEST(StreamDecoder, InvalidBytesBecomeReplacementCharactersAsInTheUnicodeStandard) {
  const Tokenizer& tok = test::qwen3_tokenizer();
  // The Unicode Standard's own example (ch. 3, "U+FFFD substitution of maximal subparts"):
  // 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 -> a FFFD FFFD FFFD b FFFD c FFFD FFFD d.
  const std::string bytes = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
  const std::string want = "a\uFFFD\uFFFD\uFFFDb\uFFFDc\uFFFD\uFFFDd";
  std::vector<int32_t> ids;
  for (unsigned char b : bytes) ids.push_back(byte_tokens().at(b));
  EXPECT_EQ(tok.decode(ids), want);
  StreamDecoder stream(tok);
  std::string emitted;
  for (int32_t id : ids) emitted += stream.push(id);
  emitted += stream.finish();
  EXPECT_EQ(emitted, want);
  // Overlong forms and surrogates are invalid byte by byte.
  std::vector<int32_t> overlong{byte_tokens().at(0xC0), byte_tokens().at(0xAF)};
  EXPECT_EQ(tok.decode(overlong), "\uFFFD\uFFFD");
  std::vector<int32_t> surrogate{byte_tokens().at(0xED), byte_tokens().at(0xA0), byte_tokens().at(0x80)};
  EXPECT_EQ(tok.decode(surrogate), "\uFFFD\uFFFD\uFFFD");
}

TEST(StreamDecoder, RandomBytesStreamToTheSameTextAsWholeDecoding) {
  const Tokenizer& tok = test::qwen3_tokenizer();
  auto rng = test::fresh_rng("stream decoder random bytes");
  for (int round = 0; round < 200; ++round) {
    std::vector<int32_t> ids;
    for (int i = static_cast<int>(rng() % 30); i > 0; --i) {
      // Mostly bytes that take part in multi-byte sequences, to make cut and invalid ones common.
      const unsigned char b = rng() % 4 ? static_cast<unsigned char>(0x80 + rng() % 0x80) : static_cast<unsigned char>(rng());
      ids.push_back(rng() % 5 ? byte_tokens().at(b) : static_cast<int32_t>(rng() % 151643));
    }
    StreamDecoder stream(tok);
    std::string emitted;
    for (int32_t id : ids) {
      const std::string piece = stream.push(id);
      ASSERT_TRUE(valid_utf8(piece));
      emitted += piece;
    }
    emitted += stream.finish();
    EXPECT_EQ(emitted, tok.decode(ids));
  }
}

TEST(StreamDecoder, FinishTurnsACutCharacterIntoOneReplacementAndStartsOver) {
  const Tokenizer& tok = test::qwen3_tokenizer();
  StreamDecoder stream(tok);
  // "€" is E2 82 AC; push only its first two bytes.
  EXPECT_EQ(stream.push(byte_tokens().at(0xE2)), "");
  EXPECT_EQ(stream.push(byte_tokens().at(0x82)), "");
  EXPECT_TRUE(stream.has_pending());
  EXPECT_EQ(stream.finish(), "\uFFFD");
  EXPECT_FALSE(stream.has_pending());
  EXPECT_EQ(stream.push(byte_tokens().at('x')), "x");
}

TEST(StreamDecoder, SkipsSpecialTokensOnlyWhenAsked) {
  const Tokenizer& tok = test::qwen3_tokenizer();
  const int32_t im_end = *tok.token_id("<|im_end|>");
  const int32_t think = *tok.token_id("<think>");
  StreamDecoder keep(tok);
  EXPECT_EQ(keep.push(im_end), "<|im_end|>");
  StreamDecoder skip(tok, {.skip_special_tokens = true});
  EXPECT_EQ(skip.push(im_end), "");
  // <think> is an added token but not a special one: it stays, as in Hugging Face.
  EXPECT_EQ(skip.push(think), "<think>");
}

TEST(StreamDecoder, UnknownIdsThrowUnlessSkipped) {
  const Tokenizer& tok = test::qwen3_tokenizer();
  StreamDecoder strict(tok);
  EXPECT_THROW(strict.push(tok.vocab_size()), Error);
  StreamDecoder lenient(tok, {.skip_unknown_ids = true});
  EXPECT_EQ(lenient.push(tok.vocab_size() + 100), "");
  EXPECT_EQ(lenient.push(byte_tokens().at('a')), "a");
}

} // namespace
