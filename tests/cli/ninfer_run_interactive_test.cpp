// ninfer-run --interactive driven through pipes, as a terminal user would drive it. The
// expected answers come from one-shot runs given the same conversation written out here in
// Qwen's chat format (not from the interactive run itself), on random-weight checkpoints with
// the real Qwen3 tokenizer: a dense Qwen3 (its KV cache can be rolled back and reused) and a
// hybrid Qwen3.5 (its Gated DeltaNet state cannot).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "child_process.hpp"
#include "demo_checkpoint.hpp"
#include "process.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace ninfer::test;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// A dense qwen3-cpu-small checkpoint with the real tokenizer, made once per test process.
const fs::path& dense_checkpoint() {
  struct Dir {
    fs::path path;
    ~Dir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  };
  static const Dir dir = [] {
    const fs::path d = fs::temp_directory_path() / ("ninfer-dense-" + std::to_string(::getpid()));
    fs::remove_all(d);
    const ProcessOutput r = run_process(std::string(NINFER_MAKE_CHECKPOINT_BIN) +
                                        " --preset qwen3-cpu-small --seed 11 --tokenizer " +
                                        shell_quote(real_tokenizer().string()) + " --out " + shell_quote(d.string()));
    if (r.status != 0) ADD_FAILURE() << "ninfer-make-checkpoint failed: " << r.err;
    return Dir{d};
  }();
  return dir.path;
}

const fs::path& hybrid_checkpoint() { return demo_checkpoint(NINFER_MAKE_CHECKPOINT_BIN); }

std::string run_cmd(const fs::path& ck, const std::string& args) {
  return std::string(NINFER_RUN_BIN) + " --checkpoint " + shell_quote(ck.string()) + " --device cpu " + args;
}

// The turns of `--interactive --json` fed `input` (then end of input).
std::vector<json> chat_turns(const fs::path& ck, const std::string& args, const std::string& input,
                             std::string* err = nullptr) {
  ChildProcess p(run_cmd(ck, "--interactive --json " + args));
  p.write(input);
  p.close_stdin();
  const int status = p.wait(120s);
  EXPECT_EQ(status, 0) << p.err();
  if (err) *err = p.err();
  std::vector<json> turns;
  std::istringstream lines(p.out());
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) turns.push_back(json::parse(line));
  return turns;
}

json one_shot(const fs::path& ck, const std::string& args) {
  const ProcessOutput r = run_process(run_cmd(ck, args + " --json"));
  EXPECT_EQ(r.status, 0) << r.err;
  return r.status == 0 ? json::parse(r.out) : json::object();
}

std::string user_turn(const std::string& text) {
  return "<|im_start|>user\n" + text + "<|im_end|>\n<|im_start|>assistant\n";
}

constexpr const char* kGreedy = "--greedy --max-new 12";

// Turn 2 of a chat is the greedy continuation of the whole conversation so far: the same ids
// as a one-shot run of that conversation written in Qwen's format, and the same answer.
void expect_second_turn_is_the_conversations_continuation(const fs::path& ck, bool reuses_cache) {
  const std::vector<json> turns = chat_turns(ck, kGreedy, "Hello there\nWhat is two plus two?\n");
  ASSERT_EQ(turns.size(), 2u);
  const std::string answer1 = turns[0]["text"];
  // The template drops an earlier answer's <think> block; a random model could write one.
  ASSERT_EQ(answer1.find("</think>"), std::string::npos) << answer1;
  const std::string history = user_turn("Hello there") + answer1 + "<|im_end|>\n" + user_turn("What is two plus two?");
  const json expected = one_shot(ck, std::string(kGreedy) + " --prompt " + shell_quote(history));
  EXPECT_EQ(turns[1]["prompt_ids"], expected["prompt_ids"]);
  EXPECT_EQ(turns[1]["generated_ids"], expected["generated_ids"]);
  EXPECT_EQ(turns[1]["text"], expected["text"]);
  EXPECT_EQ(turns[1]["turn"], 2);
  // The first turn is exactly what --chat runs.
  const json first = one_shot(ck, std::string(kGreedy) + " --chat --prompt 'Hello there'");
  EXPECT_EQ(turns[0]["prompt_ids"], first["prompt_ids"]);
  EXPECT_EQ(turns[0]["generated_ids"], first["generated_ids"]);
  EXPECT_EQ(turns[0]["reused_prompt_tokens"], 0);
  if (reuses_cache) {
    // At least the first user turn (everything before the first answer) stayed in the cache.
    const size_t first_prompt = first["prompt_ids"].size();
    EXPECT_GE(turns[1]["reused_prompt_tokens"].get<size_t>(), first_prompt);
    EXPECT_LT(turns[1]["reused_prompt_tokens"].get<size_t>(), turns[1]["prompt_ids"].size());
  }
}

} // namespace

TEST(NinferRunInteractive, SecondTurnContinuesTheConversationOnADenseModel) {
  expect_second_turn_is_the_conversations_continuation(dense_checkpoint(), true);
}

TEST(NinferRunInteractive, SecondTurnContinuesTheConversationOnAHybridModel) {
  expect_second_turn_is_the_conversations_continuation(hybrid_checkpoint(), false);
}

// /reset forgets the conversation: the turn after it is a first turn again.
TEST(NinferRunInteractive, ResetStartsAFreshConversation) {
  for (const fs::path* ck : {&dense_checkpoint(), &hybrid_checkpoint()}) {
    std::string err;
    const std::vector<json> turns = chat_turns(*ck, kGreedy, "Hello there\n/reset\nHello there\n/exit\nignored\n", &err);
    ASSERT_EQ(turns.size(), 2u) << err;
    EXPECT_EQ(turns[1]["prompt_ids"], turns[0]["prompt_ids"]);
    EXPECT_EQ(turns[1]["generated_ids"], turns[0]["generated_ids"]);
    EXPECT_EQ(turns[1]["reused_prompt_tokens"], 0);
    EXPECT_NE(err.find("new conversation"), std::string::npos) << err;
  }
}

// --system and a first message from --prompt: the first turn is the one-shot --chat run.
TEST(NinferRunInteractive, SystemAndFirstPromptAreTheChatRuns) {
  const std::string args = std::string(kGreedy) + " --system 'Be brief.' --no-think --prompt 'Hi'";
  const std::vector<json> turns = chat_turns(hybrid_checkpoint(), args, "");
  ASSERT_EQ(turns.size(), 1u);
  const json expected = one_shot(hybrid_checkpoint(), args + " --chat");
  EXPECT_EQ(turns[0]["prompt_ids"], expected["prompt_ids"]);
  EXPECT_EQ(turns[0]["generated_ids"], expected["generated_ids"]);
}

// Ctrl-C while an answer streams stops that answer, and the chat goes on; Ctrl-C at the prompt
// quits with 130.
TEST(NinferRunInteractive, CtrlCStopsTheAnswerThenQuitsAtThePrompt) {
  ChildProcess p(run_cmd(hybrid_checkpoint(), "--interactive --ignore-eos --max-new 100000 --max-context 32768"));
  p.write("Tell me a long story\n");
  ASSERT_TRUE(p.wait_for([](const std::string& out, const std::string&) { return out.size() > 8; }, 120s))
      << p.err();
  p.signal(SIGINT);
  ASSERT_TRUE(p.wait_for([](const std::string&, const std::string& err) {
    return err.find("answer stopped") != std::string::npos;
  }, 30s)) << p.err();
  const size_t answered = p.out().size();
  p.write("And another one\n");
  ASSERT_TRUE(p.wait_for([&](const std::string& out, const std::string&) { return out.size() > answered + 8; }, 60s));
  p.signal(SIGINT);
  ASSERT_TRUE(p.wait_for([](const std::string&, const std::string& err) {
    return err.find("answer stopped") != err.rfind("answer stopped");
  }, 30s)) << p.err();
  p.signal(SIGINT); // now at the prompt
  EXPECT_EQ(p.wait(30s), 130) << p.err();
}

// Flags that cannot work with --interactive are refused before anything loads (the checkpoint
// path does not exist, so a load would fail differently).
TEST(NinferRunInteractive, IncompatibleFlagsAreUsageErrors) {
  const std::string missing = std::string(NINFER_RUN_BIN) + " --checkpoint /no/such/folder --interactive ";
  for (const auto& [args, want] : std::vector<std::pair<std::string, std::string>>{
           {"--prompt-ids 1,2", "--prompt-ids"},
           {"--prompt-file -", "standard input"},
           {"--json --logprobs 2 --echo", "--echo"}}) {
    const ProcessOutput r = run_process(missing + args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(want), std::string::npos) << args << "\n" << r.err;
  }
}
