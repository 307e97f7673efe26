// format_chat against strings worked out by hand from the official Qwen3 chat_template in
// tokenizer_config.json (quoted where a case depends on a particular branch of it).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "ninfer/support/error.hpp"
#include "ninfer/tokenizer/chat_format.hpp"
#include "qwen3_tokenizer.hpp"
#include "test_support.hpp"

namespace {

using namespace ninfer;

TEST(ChatFormat, SystemAndUserWithThinkingOn) {
  // {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }} ... and for add_generation_prompt
  // {{- '<|im_start|>assistant\n' }} with nothing after it unless enable_thinking is false.
  EXPECT_EQ(format_chat({{"system", "You are helpful."}, {"user", "Hi"}}),
            "<|im_start|>system\nYou are helpful.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatFormat, ThinkingOffAddsAnEmptyThinkBlock) {
  // {%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\n\n</think>\n\n' }}
  EXPECT_EQ(format_chat({{"user", "Hi"}}, {.enable_thinking = false}),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatFormat, WithoutGenerationPrompt) {
  EXPECT_EQ(format_chat({{"user", "Hi"}}, {.add_generation_prompt = false}), "<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_EQ(format_chat({{"user", "Hi"}}, {.add_generation_prompt = false, .enable_thinking = false}),
            "<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatFormat, HistoryReasoningBeforeTheLastQuestionIsDropped) {
  // The assistant turn (index 1) is before last_query_index (2), so only `content` -- the text
  // after '</think>', lstripped of newlines -- is rendered.
  EXPECT_EQ(format_chat({{"user", "Q1"}, {"assistant", "<think>\nfirst thoughts\n</think>\n\nA1"}, {"user", "Q2"}}),
            "<|im_start|>user\nQ1<|im_end|>\n"
            "<|im_start|>assistant\nA1<|im_end|>\n"
            "<|im_start|>user\nQ2<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatFormat, AFinalAssistantTurnKeepsItsReasoning) {
  // index 1 > last_query_index 0 and loop.last: '<think>\n' + reasoning.strip('\n') + '\n</think>\n\n' + content.
  EXPECT_EQ(format_chat({{"user", "Q"}, {"assistant", "<think>r</think>A"}}, {.add_generation_prompt = false}),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\nA<|im_end|>\n");
  // Even without reasoning the last assistant turn gets an (empty) think block.
  EXPECT_EQ(format_chat({{"user", "Q"}, {"assistant", "A"}}, {.add_generation_prompt = false}),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nA<|im_end|>\n");
}

TEST(ChatFormat, ReasoningIsCutOutWithTheTemplatesNewlineRules) {
  // content = content.split('</think>')[-1].lstrip('\n') -> "Answer"
  // reasoning = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') -> "abc"
  EXPECT_EQ(format_chat({{"user", "Q"}, {"assistant", "\n\n<think>\n\nabc\n\n</think>\n\n\nAnswer"}},
                        {.add_generation_prompt = false}),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nabc\n</think>\n\nAnswer<|im_end|>\n");
}

TEST(ChatFormat, ExplicitReasoningContentIsUsedAndContentIsKeptAsIs) {
  // With reasoning_content given, content is not searched for </think>.
  EXPECT_EQ(format_chat({{"user", "Q"}, {"assistant", "\nA", std::string("\nr\n")}}, {.add_generation_prompt = false}),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\nA<|im_end|>\n");
  EXPECT_EQ(format_chat({{"user", "Q1"}, {"assistant", "A1", std::string("r1")}, {"user", "Q2"}},
                        {.add_generation_prompt = false}),
            "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n");
}

TEST(ChatFormat, ToolResultsShareOneUserTurnAndDoNotCountAsTheQuestion) {
  // Consecutive tool messages: '<|im_start|>user' once, then '\n<tool_response>\n' + content +
  // '\n</tool_response>' each, then '<|im_end|>\n'. A user message that is itself a
  // <tool_response>...</tool_response> is skipped when finding last_query_index, so the assistant
  // turn after the real question (index 1) keeps its reasoning because it has some.
  EXPECT_EQ(format_chat({{"user", "Q"},
                         {"assistant", "<think>x</think>calling"},
                         {"tool", "r1"},
                         {"tool", "r2"},
                         {"user", "<tool_response>r3</tool_response>"},
                         {"assistant", "plain"}},
                        {.add_generation_prompt = false}),
            "<|im_start|>user\nQ<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nx\n</think>\n\ncalling<|im_end|>\n"
            "<|im_start|>user\n<tool_response>\nr1\n</tool_response>\n<tool_response>\nr2\n</tool_response><|im_end|>\n"
            "<|im_start|>user\n<tool_response>r3</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\nplain<|im_end|>\n");
}

TEST(ChatFormat, AssistantWithoutReasoningAfterTheQuestionButNotLastIsPlain) {
  // loop.index0 > last_query_index, not loop.last, reasoning_content empty -> '<|im_start|>assistant\n' + content.
  EXPECT_EQ(format_chat({{"user", "Q"}, {"assistant", "A"}, {"tool", "t"}}, {.add_generation_prompt = false}),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n"
            "<|im_start|>user\n<tool_response>\nt\n</tool_response><|im_end|>\n");
}

TEST(ChatFormat, ASystemMessageAfterTheFirstIsAnOrdinaryTurn) {
  EXPECT_EQ(format_chat({{"user", "Q"}, {"system", "S"}}, {.add_generation_prompt = false}),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>system\nS<|im_end|>\n");
}

TEST(ChatFormat, BadConversationsAreErrors) {
  EXPECT_THROW(format_chat({}), Error);
  try {
    format_chat({{"user", "Q"}, {"robot", "beep"}});
    FAIL() << "an unknown role must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("robot"), std::string::npos) << e.what();
  }
}

TEST(ChatFormat, APromptEncodesToTheGoldenChatIds) {
  // The golden fixture's chat case is exactly the prompt for one user turn "Hi there".
  const auto path = test::fixtures_dir() / "tokenizer/qwen3-golden.json";
  const auto golden = nlohmann::json::parse(std::ifstream(path));
  const std::string prompt = format_chat({{"user", "Hi there"}});
  bool found = false;
  for (const auto& c : golden.at("cases")) {
    if (c.at("text") != prompt) continue;
    found = true;
    EXPECT_EQ(test::qwen3_tokenizer().encode(prompt), c.at("ids").get<std::vector<int32_t>>());
  }
  EXPECT_TRUE(found) << "the golden fixture has no case for the prompt " << prompt;
}

} // namespace
