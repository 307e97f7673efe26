// Agreement with ids that @huggingface/tokenizers produced for the real Qwen3 tokenizer
// (tests/fixtures/tokenizer/qwen3-golden.json, made outside this project).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "ninfer/tokenizer/tokenizer.hpp"
#include "qwen3_tokenizer.hpp"
#include "test_support.hpp"

namespace {

using namespace ninfer;

nlohmann::json golden() {
  const auto path = test::fixtures_dir() / "tokenizer/qwen3-golden.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("missing fixture " + path.string());
  return nlohmann::json::parse(in);
}

TEST(TokenizerGolden, EveryCaseEncodesToTheReferenceIds) {
  const Tokenizer& tok = test::qwen3_tokenizer();
  const auto cases = golden().at("cases");
  ASSERT_GE(cases.size(), 20u);
  for (const auto& c : cases) {
    const std::string text = c.at("text");
    const auto want = c.at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode(text), want) << "text: " << text;
  }
}

TEST(TokenizerGolden, EveryCaseDecodesToTheReferenceText) {
  const Tokenizer& tok = test::qwen3_tokenizer();
  for (const auto& c : golden().at("cases")) {
    const auto ids = c.at("ids").get<std::vector<int32_t>>();
    const std::string want = c.at("decoded");
    EXPECT_EQ(tok.decode(ids), want) << "ids of: " << c.at("text").get<std::string>();
    // The round trip through our own encoder too.
    EXPECT_EQ(tok.decode(tok.encode(c.at("text").get<std::string>())), want);
  }
}

TEST(TokenizerGolden, SizesMatchTheQwen3Vocabulary) {
  const Tokenizer& tok = test::qwen3_tokenizer();
  // 151643 BPE tokens (ids 0..151642) and 26 added tokens (151643..151668), per tokenizer.json.
  EXPECT_EQ(tok.vocab_size(), 151669);
  EXPECT_EQ(tok.added_tokens().size(), 26u);
  for (int32_t id = 0; id < tok.vocab_size(); ++id) ASSERT_TRUE(tok.has_token(id)) << id;
  EXPECT_FALSE(tok.has_token(151669));
  EXPECT_FALSE(tok.has_token(-1));
}

} // namespace
