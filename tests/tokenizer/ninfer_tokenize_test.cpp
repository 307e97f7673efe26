// ninfer-tokenize as a user runs it: a real process, its exit status and output. Expected ids
// come from the golden fixture (made with @huggingface/tokenizers).
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "process.hpp"
#include "qwen3_tokenizer.hpp"

namespace {

using ninfer::test::ProcessOutput;

// Runs ninfer-tokenize with `args` (/bin/sh words); stderr is appended after stdout when asked.
// `input`, a printf format (\n, octal \377), is piped to its standard input.
ProcessOutput run_tokenize(const std::string& args, bool with_stderr = false, const std::string& input = "") {
  ProcessOutput r = ninfer::test::run_process((input.empty() ? "" : "printf '" + input + "' | ") +
                                              std::string(NINFER_TOKENIZE_BIN) + " " + args);
  if (with_stderr) r.out += r.err;
  return r;
}

std::string tokenizer_arg() { return "--tokenizer '" + ninfer::test::qwen3_tokenizer_path().string() + "'"; }

TEST(NinferTokenize, EncodesTextToTheReferenceIds) {
  const ProcessOutput r = run_tokenize(tokenizer_arg() + " --text 'Hello world'");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out), nlohmann::json::parse(R"({"ids": [9707, 1879]})"));
}

TEST(NinferTokenize, RecognisesSpecialTokensAndAddsNothing) {
  const ProcessOutput r = run_tokenize(tokenizer_arg() + " --stdin", false,
                                      "<|im_start|>user\\nHi there<|im_end|>\\n<|im_start|>assistant\\n");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("ids"),
            nlohmann::json::parse("[151644, 872, 198, 13048, 1052, 151645, 198, 151644, 77091, 198]"));
}

TEST(NinferTokenize, DecodesIdsToText) {
  ProcessOutput r = run_tokenize(tokenizer_arg() + " --decode 9707,1879");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "Hello world\n");
  r = run_tokenize(tokenizer_arg() + " --decode '9707, 1879,151645' --json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("text"), "Hello world<|im_end|>");
  r = run_tokenize(tokenizer_arg() + " --decode 9707,151645 --skip-special");
  EXPECT_EQ(r.out, "Hello\n");
}

TEST(NinferTokenize, BadInputIsAClearErrorWithNonZeroExit) {
  struct Case {
    std::string args;
    std::string message;
    std::string input = "";
  };
  const std::vector<Case> cases{
      {tokenizer_arg() + " --decode 9707,abc", "'abc' is not a token id"},
      {tokenizer_arg() + " --decode 9707,", "'' is not a token id"},
      {tokenizer_arg() + " --decode 99999999", "99999999 is not in the tokenizer's vocabulary"},
      {tokenizer_arg() + " --stdin", "not valid UTF-8 at byte 4", "bad \\377 byte"},
      {"--tokenizer /nonexistent/tokenizer.json --text hi", "/nonexistent/tokenizer.json does not exist"},
      {tokenizer_arg(), "one of --text, --stdin or --decode is required"},
      {tokenizer_arg() + " --text a --decode 1", "excludes"},
      {"--text hi", "--tokenizer is required"},
      {tokenizer_arg() + " --frobnicate", "frobnicate"},
  };
  for (const Case& c : cases) {
    const ProcessOutput r = run_tokenize(c.args, true, c.input);
    EXPECT_NE(r.status, 0) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_EQ(r.out.find("{\"ids\""), std::string::npos) << "no result may be printed on error: " << r.out;
  }
}

TEST(NinferTokenize, HelpDescribesTheOptions) {
  const ProcessOutput r = run_tokenize("--help");
  EXPECT_EQ(r.status, 0);
  for (const char* option : {"--tokenizer", "--text", "--decode", "--stdin", "--chat", "--no-think", "--json"})
    EXPECT_NE(r.out.find(option), std::string::npos) << option;
}

} // namespace
