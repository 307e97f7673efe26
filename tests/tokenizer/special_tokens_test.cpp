// Added and special tokens written in text are recognised as single ids, and split the text
// into parts that are tokenised independently.
#include <gtest/gtest.h>

#include "ninfer/support/error.hpp"
#include "ninfer/tokenizer/chat_format.hpp"
#include "ninfer/tokenizer/tokenizer.hpp"
#include "qwen3_tokenizer.hpp"
#include "random_text.hpp"
#include "test_support.hpp"

namespace {

using namespace ninfer;

TEST(SpecialTokens, EveryAddedTokenEncodesToItsOwnIdAndBack) {
  const Tokenizer& tok = test::qwen3_tokenizer();
  for (const AddedToken& a : tok.added_tokens()) {
    EXPECT_EQ(tok.encode(a.content), std::vector<int32_t>{a.id}) << a.content;
    EXPECT_EQ(tok.decode(std::vector<int32_t>{a.id}), a.content);
    EXPECT_EQ(tok.token_id(a.content), a.id);
  }
}

TEST(SpecialTokens, ChatTokensHaveTheIdsOfQwen3TokenizerJson) {
  // Ids as listed in added_tokens of the Qwen3 tokenizer.json.
  const ChatTokens t = chat_tokens(test::qwen3_tokenizer());
  EXPECT_EQ(t.endoftext, 151643);
  EXPECT_EQ(t.im_start, 151644);
  EXPECT_EQ(t.im_end, 151645);
  EXPECT_EQ(t.think, 151667);
  EXPECT_EQ(t.think_end, 151668);
  const Tokenizer& tok = test::qwen3_tokenizer();
  EXPECT_TRUE(tok.is_special(t.im_end));
  EXPECT_TRUE(tok.is_special(t.endoftext));
  EXPECT_FALSE(tok.is_special(t.think));  // added but not special
}

TEST(SpecialTokens, TextAroundATokenIsTokenisedAsIfTheTokenWereACut) {
  const Tokenizer& tok = test::qwen3_tokenizer();
  auto rng = test::fresh_rng("special token splits");
  const auto& added = tok.added_tokens();
  for (int round = 0; round < 200; ++round) {
    const std::string before = test::random_text(rng, {.min_fragments = 0, .max_fragments = 8, .special_tokens = false});
    const std::string after = test::random_text(rng, {.min_fragments = 0, .max_fragments = 8, .special_tokens = false});
    const AddedToken& a = added[rng() % added.size()];
    std::vector<int32_t> want = tok.encode(before);
    want.push_back(a.id);
    for (int32_t id : tok.encode(after)) want.push_back(id);
    EXPECT_EQ(tok.encode(before + a.content + after), want)
        << test::escaped(before) << " | " << a.content << " | " << test::escaped(after);
  }
}

TEST(SpecialTokens, AdjacentTokensAndNearMisses) {
  const Tokenizer& tok = test::qwen3_tokenizer();
  EXPECT_EQ(tok.encode("<think></think>"), (std::vector<int32_t>{151667, 151668}));
  EXPECT_EQ(tok.encode("<|im_end|><|im_end|>"), (std::vector<int32_t>{151645, 151645}));
  for (const char* miss : {"<|im_start|", "<|im_start >", "<think", "< think>", "<|IM_START|>", "<|im_end>"}) {
    for (int32_t id : tok.encode(miss)) EXPECT_LT(id, 151643) << miss << " must not produce an added token";
    EXPECT_EQ(tok.decode(tok.encode(miss)), miss);
  }
}

TEST(SpecialTokens, DecodeCanLeaveOutSpecialTokens) {
  const Tokenizer& tok = test::qwen3_tokenizer();
  const auto ids = tok.encode("<|im_start|>assistant\n<think>\nhmm\n</think>\n\nHi!<|im_end|><|endoftext|>");
  EXPECT_EQ(tok.decode(ids, {.skip_special_tokens = true}), "assistant\n<think>\nhmm\n</think>\n\nHi!");
}

TEST(SpecialTokens, TokenIdLooksUpByteLevelVocabularyEntries) {
  const Tokenizer& tok = test::qwen3_tokenizer();
  // The golden fixture encodes "Hello world" as [9707, 1879]: "Hello" and " world" ("Ġworld").
  EXPECT_EQ(tok.token_id("Hello"), 9707);
  EXPECT_EQ(tok.token_id("\xC4\xA0world"), 1879);
  EXPECT_EQ(tok.token_bytes(1879), " world");
  EXPECT_FALSE(tok.token_id("no such token here").has_value());
  EXPECT_THROW(tok.require_token_id("<|no_such|>"), Error);
}

} // namespace
