// Agreement with @huggingface/tokenizers on fresh random text, through the real Qwen3 tokenizer:
// every run draws new texts (the seed is printed; NINFER_TEST_SEED replays one).
#include <gtest/gtest.h>

#include "hf_oracle.hpp"
#include "ninfer/tokenizer/tokenizer.hpp"
#include "qwen3_tokenizer.hpp"
#include "random_text.hpp"
#include "test_support.hpp"

namespace {

using namespace ninfer;

void expect_agreement(const std::vector<std::string>& texts) {
  const Tokenizer& tok = test::qwen3_tokenizer();
  const auto reference = test::run_hf_oracle(test::qwen3_tokenizer_path(), texts);
  ASSERT_EQ(reference.size(), texts.size());
  int failures = 0;
  for (size_t i = 0; i < texts.size() && failures < 10; ++i) {
    const auto ids = tok.encode(texts[i]);
    const auto decoded = tok.decode(ids);
    if (ids != reference[i].ids || decoded != reference[i].decoded) {
      ++failures;
      ADD_FAILURE() << "text: " << test::escaped(texts[i]) << "\n  ninfer ids: " << testing::PrintToString(ids)
                    << "\n  reference:  " << testing::PrintToString(reference[i].ids)
                    << "\n  ninfer decoded: " << test::escaped(decoded)
                    << "\n  reference:      " << test::escaped(reference[i].decoded);
    }
  }
}

TEST(TokenizerAgreement, RandomMixedTextMatchesHuggingFace) {
  auto rng = test::fresh_rng("tokenizer agreement");
  std::vector<std::string> texts;
  for (int i = 0; i < 400; ++i) texts.push_back(test::random_text(rng));
  expect_agreement(texts);
}

TEST(TokenizerAgreement, LongAndDegenerateInputsMatchHuggingFace) {
  auto rng = test::fresh_rng("tokenizer agreement, long inputs");
  std::vector<std::string> texts{
      std::string(5000, 'a'),         // one 5000-byte pre-token: exercises the merge queue
      std::string(3000, ' ') + "x",   // whitespace run before a word
      std::string(3000, ' '),         // trailing whitespace run
      std::string(2000, '\n') + " \n \n",
      "'''''''''''sssss'''LL",
  };
  std::string word;
  for (int i = 0; i < 800; ++i) word += test::random_multibyte_text(rng, 1);
  texts.push_back(word);  // one long run of letters from many scripts
  texts.push_back(test::random_text(rng, {.min_fragments = 2000, .max_fragments = 3000}));
  expect_agreement(texts);
}

} // namespace
