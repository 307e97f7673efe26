// What every tool's command line promises (docs/cli.md, "Exit codes"): --version, one exit
// code per class of error (2: the command line, 1: the model, input or device), flag problems
// found before anything loads, warnings for flags without effect, and errors that say what to do.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <fstream>
#include <regex>

#include "demo_checkpoint.hpp"
#include "process.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace ninfer::test;
using nlohmann::json;

namespace {

const std::vector<std::pair<std::string, std::string>> kTools = {
    {"ninfer-run", NINFER_RUN_BIN},         {"ninfer-serve", NINFER_SERVE_BIN},
    {"ninfer-info", NINFER_INFO_BIN},       {"ninfer-bench", NINFER_BENCH_BIN},
    {"ninfer-tune", NINFER_TUNE_BIN},       {"ninfer-tokenize", NINFER_TOKENIZE_BIN},
    {"ninfer-make-checkpoint", NINFER_MAKE_CHECKPOINT_BIN}, {"ninfer-quantize", NINFER_QUANTIZE_BIN}};

std::string fixture() { return shell_quote((fixtures_dir() / "tiny-qwen3").string()); }

ProcessOutput run(const std::string& args) { return run_process(std::string(NINFER_RUN_BIN) + " " + args); }

// tiny-qwen3's KV cache for `context` tokens in float32: 2 (K and V) x layers x KV heads x
// head_dim x 4 bytes per token, from its config.json.
double kv_kib(int64_t context) {
  std::ifstream in(fixtures_dir() / "tiny-qwen3" / "config.json");
  const json c = json::parse(in);
  const int64_t head_dim = c.contains("head_dim") ? c["head_dim"].get<int64_t>()
                                                   : c["hidden_size"].get<int64_t>() / c["num_attention_heads"].get<int64_t>();
  return 2.0 * c["num_hidden_layers"].get<int64_t>() * c["num_key_value_heads"].get<int64_t>() * head_dim * 4.0 *
         static_cast<double>(context) / 1024.0;
}

// "kv-cache 192.0 KiB" from the memory budget line (-v not needed: it is an info line).
double logged_kv_kib(const std::string& err) {
  std::smatch m;
  if (!std::regex_search(err, m, std::regex(R"(kv-cache ([0-9.]+) (KiB|MiB|B)\b)"))) return -1;
  const double v = std::stod(m[1]);
  return m[2] == "MiB" ? v * 1024 : m[2] == "B" ? v / 1024 : v;
}

} // namespace

TEST(ToolCli, EveryToolPrintsTheBuildVersion) {
  for (const auto& [name, bin] : kTools) {
    const ProcessOutput r = run_process(bin + " --version");
    EXPECT_EQ(r.status, 0) << name << ": " << r.err;
    EXPECT_EQ(r.out.rfind(name + " " + NINFER_PROJECT_VERSION, 0), 0u) << name << ": " << r.out;
  }
}

TEST(ToolCli, EveryToolGivesExitCode2ForACommandLineProblem) {
  for (const auto& [name, bin] : kTools) {
    const ProcessOutput unknown = run_process(bin + " --tokenizer x --no-such-flag");
    EXPECT_EQ(unknown.status, 2) << name << ": " << unknown.err;
    EXPECT_NE(unknown.err.find("--no-such-flag"), std::string::npos) << name << ": " << unknown.err;
    EXPECT_EQ(run_process(bin + " --help").status, 0) << name;
  }
  // Values CLI11 cannot convert or that fail a check, and options that exclude each other.
  EXPECT_EQ(run("--checkpoint x --prompt-ids 1 --max-new abc").status, 2);
  EXPECT_EQ(run("--checkpoint x --prompt a --prompt-ids 1").status, 2);
  EXPECT_EQ(run("--checkpoint x --prompt-ids 1 --kv-dtype float8").status, 2);
  // Token ids that are not whole numbers from 0, or an empty piece, name the piece.
  for (const char* ids : {"''", "1,,2", "1,", ",", "1,-2", "99999999999999999999", "1,x"}) {
    const ProcessOutput r = run(std::string("--checkpoint x --max-new 1 --prompt-ids ") + ids);
    EXPECT_EQ(r.status, 2) << ids << "\n" << r.err;
    EXPECT_NE(r.err.find("is not a token id"), std::string::npos) << ids << "\n" << r.err;
  }
  EXPECT_EQ(run_process(std::string(NINFER_BENCH_BIN) + " --preset qwen3-cpu-small --skip-prefill --skip-decode").status, 2);
  EXPECT_EQ(run_process(std::string(NINFER_INFO_BIN) + " --plan linear --tokens 0").status, 2);
  EXPECT_EQ(run_process(std::string(NINFER_SERVE_BIN) + " --device gpu --checkpoint x").status, 2);
  // (In a scratch cache: were the flag accepted, a tuned table must not land in the user's.)
  EXPECT_EQ(run_process("NINFER_CACHE_DIR=" + shell_quote((fs::temp_directory_path() / "ninfer-cli-cache").string()) +
                        " " + NINFER_TUNE_BIN + " --preset qwen3-cpu-small --repeats 0")
                .status,
            2);
  EXPECT_EQ(run_process(std::string(NINFER_TOKENIZE_BIN) + " --tokenizer x").status, 2);
  EXPECT_EQ(run_process(std::string(NINFER_MAKE_CHECKPOINT_BIN) + " --preset qwen3-cpu-small").status, 2);
  EXPECT_EQ(run_process(std::string(NINFER_QUANTIZE_BIN) + " --checkpoint x --out y --max-shard-size 3XB").status, 2);
  EXPECT_EQ(run_process(std::string(NINFER_QUANTIZE_BIN) + " --checkpoint x").status, 2); // --out missing
  // GiB and counts out of range, NaN among them, in the tools' words (not the largest double).
  for (const std::string& cmd : {std::string(NINFER_RUN_BIN) + " --checkpoint x --prompt-ids 1 --memory-limit 1e30",
                                 std::string(NINFER_RUN_BIN) + " --checkpoint x --prompt-ids 1 --memory-limit nan",
                                 std::string(NINFER_INFO_BIN) + " --fit --preset qwen3-8b --memory nan",
                                 std::string(NINFER_INFO_BIN) + " --fit --preset qwen3-8b --memory 0",
                                 std::string(NINFER_INFO_BIN) + " --fit --preset qwen3-8b --concurrency 0"}) {
    const ProcessOutput r = run_process(cmd);
    EXPECT_EQ(r.status, 2) << cmd << "\n" << r.err;
    EXPECT_EQ(r.err.find("1797693"), std::string::npos) << r.err;
  }
}

// Flags that do not go together are refused before anything is read: the checkpoint does not
// exist, so had it been opened first, the error would name the folder instead (exit 1).
TEST(ToolCli, FlagCombinationsAreCheckedBeforeTheModelLoads) {
  const std::string missing = "--checkpoint /no/such/checkpoint ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--prompt-ids 1 --json --echo", "--echo needs --logprobs"},
      {"--prompt-ids 1 --logprobs 2", "need --json"},
      {"--prompt-ids 1 --echo", "need --json"},
      {"--prompt-ids 1 --json --logprobs -1", "--logprobs must be >= 0"},
      {"--chat --prompt-ids 1,2", "--chat needs --prompt"},
      {"--prompt-ids 1 --greedy --temperature 0.7", "contradict"},
      {"--prompt-ids 1 --max-new -1", "--max-new"},
      {"--prompt-ids 1 --max-context 1", "--max-context"},
      {"--prompt-ids 1 --device gpu", "--device gpu"},
      {"--prompt-ids 1 --threads 0", "--threads"},
      {"--prompt-ids 1 --stop-id -1", "--stop-id -1"},
      {"--prompt-ids 1 --stop-id 4294967296", "--stop-id 4294967296"}, // not token 0 after a cast
      {"--prompt-ids 1 --logit-bias x=1", "expected ID=BIAS"},
      {"--prompt-ids 1 --logit-bias 5", "expected ID=BIAS"},
      {"--prompt-ids 1 --logit-bias 5=high", "expected ID=BIAS"},
      {"--prompt-ids 1 --logit-bias -5=1", "--logit-bias"},
      {"--prompt-ids 1 --logit-bias 5=101", "[-100, 100]"},
      {"--prompt-ids 1 --logit-bias 5=nan", "[-100, 100]"},
      {"--prompt-ids 1 --logit-bias 5=1 --logit-bias 5=-1", "given twice"},
      {"--max-new 3", "no prompt"},
      {fixture() + " --prompt-ids 1", "not both"},
  };
  for (const auto& [args, want] : cases) {
    const ProcessOutput r = run(missing + args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(want), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(r.err.find("no/such/checkpoint"), std::string::npos) << args << ": the model was looked at first";
  }
  const ProcessOutput none = run("--prompt-ids 1");
  EXPECT_EQ(none.status, 2);
  EXPECT_NE(none.err.find("no model"), std::string::npos) << none.err;
}

TEST(ToolCli, ModelInputAndDeviceProblemsExitWith1) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--checkpoint /no/such/checkpoint --prompt-ids 1", "/no/such/checkpoint"},
      {"--checkpoint " + fixture() + " --prompt-ids 1,99999", "99999"},
      {"--checkpoint " + fixture() + " --prompt-ids 1,2,3 --max-new 10 --max-context 8", "exceed the context"},
      {"--checkpoint " + fixture() + " --prompt hello", "needs a tokenizer"},
      {"--checkpoint " + fixture() + " --prompt-file /no/such/prompt.txt", "/no/such/prompt.txt"},
      {"--checkpoint " + fixture() + " --prompt-file " + fixture(), "is a folder"}, // not "the prompt is empty"
      {"--checkpoint " + fixture() + " --prompt-ids 1 --logit-bias 99999=1", "--logit-bias: token 99999"},
      // tiny-qwen3 has 4096 positions (config.json): a longer context was never trained.
      {"--checkpoint " + fixture() + " --prompt-ids 1 --max-context 4097", "--max-context: 4097 exceeds the model's 4096 positions"},
  };
  for (const auto& [args, want] : cases) {
    const ProcessOutput r = run(args);
    EXPECT_EQ(r.status, 1) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(want), std::string::npos) << args << "\n" << r.err;
  }
}

// No GPU here (or a build without CUDA): --device cuda says so and what to do instead, in
// every tool that takes --device.
TEST(ToolCli, CudaWithoutAGpuSaysUseDeviceCpu) {
  const ProcessOutput r = run("--checkpoint " + fixture() + " --prompt-ids 1 --device cuda");
  if (r.status == 0) GTEST_SKIP() << "this machine has a usable NVIDIA GPU";
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("no NVIDIA GPU"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("use --device cpu"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("insufficient"), std::string::npos) << r.err;
  const ProcessOutput bench = run_process(std::string(NINFER_BENCH_BIN) + " --preset qwen3-cpu-small --device cuda");
  EXPECT_EQ(bench.status, 1);
  EXPECT_NE(bench.err.find("use --device cpu"), std::string::npos) << bench.err;
}

// An unknown plugin is named as such, with the plugins there are listed once.
TEST(ToolCli, UnknownPluginIsNamedAndTheAvailableOnesListedOnce) {
  for (const std::string& cmd : {std::string(NINFER_RUN_BIN) + " --checkpoint " + fixture() + " --prompt-ids 1",
                                 std::string(NINFER_INFO_BIN)}) {
    const ProcessOutput r = run_process(cmd + " --plugin nope");
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_NE(r.err.find("--plugin nope: no plugin of that name"), std::string::npos) << r.err;
    const size_t at = r.err.find("available: ");
    ASSERT_NE(at, std::string::npos) << r.err;
    EXPECT_NE(r.err.find("cpu", at), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("available", at + 1), std::string::npos) << "listed twice: " << r.err;
  }
}

TEST(ToolCli, FlagsWithoutEffectAreWarnedAbout) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--system 'Be brief.'", "--system has no effect"},
      {"--no-think", "--no-think has no effect"},
      {"--greedy --seed 3", "--seed has no effect"},
      {"--greedy --top-k 5", "--top-k, --top-p and --min-p have no effect with greedy"},
      {"--no-cuda-graph", "--no-cuda-graph has no effect"},
  };
  const ProcessOutput plain = run("--checkpoint " + fixture() + " --prompt-ids 1,2 --max-new 2 --device cpu");
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(plain.err.find("warning:"), std::string::npos) << plain.err;
  for (const auto& [args, want] : cases) {
    const ProcessOutput r = run("--checkpoint " + fixture() + " --prompt-ids 1,2 --max-new 2 --device cpu " + args);
    EXPECT_EQ(r.status, 0) << args << "\n" << r.err;
    EXPECT_NE(r.err.find("ninfer-run: warning: " + want), std::string::npos) << args << "\n" << r.err;
  }
}

// A one-shot run reserves the context it needs (prompt + --max-new, rounded up to 256), not the
// model's 32K; --max-context still decides when given.
TEST(ToolCli, OneShotContextIsSizedToThePromptAndMaxNew) {
  const std::string base = "--checkpoint " + fixture() + " --device cpu --prompt-ids 1,2,3 ";
  const ProcessOutput small = run(base + "--max-new 5");
  ASSERT_EQ(small.status, 0) << small.err;
  EXPECT_NEAR(logged_kv_kib(small.err), kv_kib(256), 0.1) << small.err;
  const ProcessOutput larger = run(base + "--max-new 300");
  ASSERT_EQ(larger.status, 0) << larger.err;
  EXPECT_NEAR(logged_kv_kib(larger.err), kv_kib(512), 0.1) << larger.err;
  const ProcessOutput given = run(base + "--max-new 5 --max-context 1000");
  ASSERT_EQ(given.status, 0) << given.err;
  EXPECT_NEAR(logged_kv_kib(given.err), kv_kib(1024), 0.1) << given.err; // 1000 in whole 64-token KV blocks
}

// --logit-bias moves the greedy pick as the server's logit_bias does: +100 all but forces a
// token, -100 keeps the unbiased pick out.
TEST(ToolCli, LogitBiasMovesTheGreedyPick) {
  const std::string base = "--checkpoint " + fixture() + " --device cpu --prompt-ids 1,2,3 --greedy --max-new 3 --json";
  const ProcessOutput plain = run(base);
  ASSERT_EQ(plain.status, 0) << plain.err;
  const int first = json::parse(plain.out)["generated_ids"][0].get<int>();
  const int forced = first == 7 ? 8 : 7;
  const ProcessOutput up = run(base + " --logit-bias " + std::to_string(forced) + "=100");
  ASSERT_EQ(up.status, 0) << up.err;
  EXPECT_EQ(json::parse(up.out)["generated_ids"], json::array({forced, forced, forced}));
  const ProcessOutput down = run(base + " --logit-bias " + std::to_string(first) + "=-100");
  ASSERT_EQ(down.status, 0) << down.err;
  EXPECT_NE(json::parse(down.out)["generated_ids"][0].get<int>(), first);
}

// --prompt-file reads the prompt as --prompt would take it; "-" reads standard input.
TEST(ToolCli, PromptFileAndStdinGiveTheSamePromptAsPromptText) {
  const fs::path ck = fs::temp_directory_path() / ("ninfer-prompt-file-" + std::to_string(::getpid()));
  ASSERT_EQ(run_process(std::string(NINFER_MAKE_CHECKPOINT_BIN) + " --preset qwen3-cpu-small --tokenizer " +
                        shell_quote(real_tokenizer().string()) + " --out " + shell_quote(ck.string()))
                .status,
            0);
  const fs::path file = ck / "prompt.txt";
  const std::string text = "Once upon a time,\nin a land far away";
  std::ofstream(file) << text;
  const std::string base = std::string(NINFER_RUN_BIN) + " --checkpoint " + shell_quote(ck.string()) +
                           " --device cpu --greedy --max-new 4 --json";
  const ProcessOutput direct = run_process(base + " --prompt " + shell_quote(text));
  const ProcessOutput from_file = run_process(base + " --prompt-file " + shell_quote(file.string()));
  const ProcessOutput from_stdin = run_process(base + " --prompt-file - < " + shell_quote(file.string()));
  ASSERT_EQ(direct.status, 0) << direct.err;
  ASSERT_EQ(from_file.status, 0) << from_file.err;
  ASSERT_EQ(from_stdin.status, 0) << from_stdin.err;
  const json a = json::parse(direct.out), b = json::parse(from_file.out), c = json::parse(from_stdin.out);
  EXPECT_GT(a["prompt_ids"].size(), 8u);
  EXPECT_EQ(b["prompt_ids"], a["prompt_ids"]);
  EXPECT_EQ(c["prompt_ids"], a["prompt_ids"]);
  EXPECT_EQ(c["generated_ids"], a["generated_ids"]);
  fs::remove_all(ck);
}

// --threads sets the CPU plugin's threads, as NINFER_CPU_THREADS does; the device says how many.
TEST(ToolCli, ThreadsFlagSetsTheCpuPluginsThreads) {
  const std::string base = "--checkpoint " + fixture() + " --device cpu --prompt-ids 1,2 --max-new 3 --greedy --json";
  const ProcessOutput one = run(base + " --threads 1");
  const ProcessOutput three = run(base + " --threads 3");
  ASSERT_EQ(one.status, 0) << one.err;
  ASSERT_EQ(three.status, 0) << three.err;
  EXPECT_EQ(json::parse(one.out)["device"], "host CPU (1 threads)");
  EXPECT_EQ(json::parse(three.out)["device"], "host CPU (3 threads)");
  // The split never changes a result (docs/ops.md).
  EXPECT_EQ(json::parse(one.out)["generated_ids"], json::parse(three.out)["generated_ids"]);
}

// The loading bar is drawn on a terminal only: through a pipe stderr has none of it.
TEST(ToolCli, ProgressBarOnlyOnATerminal) {
  const ProcessOutput piped = run("--checkpoint " + fixture() + " --device cpu --prompt-ids 1,2 --max-new 2");
  ASSERT_EQ(piped.status, 0);
  EXPECT_EQ(piped.err.find("loading weights"), std::string::npos) << piped.err;
  if (run_process("command -v script").status != 0) GTEST_SKIP() << "no `script` to give the tool a terminal";
  // script(1) runs the tool on a pseudo-terminal and copies what it wrote.
  const ProcessOutput tty = run_process("script -qec " +
                                        shell_quote(std::string(NINFER_RUN_BIN) + " --checkpoint " + fixture() +
                                                    " --device cpu --prompt-ids 1,2 --max-new 2") +
                                        " /dev/null");
  ASSERT_EQ(tty.status, 0) << tty.out;
  EXPECT_NE(tty.out.find("loading weights"), std::string::npos) << tty.out;
}
