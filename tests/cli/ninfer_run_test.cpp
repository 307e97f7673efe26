// ninfer-run end to end. Numbers come from transformers (tests/fixtures: greedy ids, margins,
// teacher-forced logits), never from ninfer-run's own earlier output; where a test reuses a
// first run's output it asserts a relation (a stop truncates exactly there), not a value.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "ninfer/checkpoint/safetensors_file.hpp"
#include "demo_checkpoint.hpp"
#include "process.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace ninfer;
using namespace ninfer::test;
using nlohmann::json;

namespace {

constexpr double kLogprobTolerance = 1e-3; // float32 CPU path vs float64 reference (fixtures README)

std::string ids_csv(const json& ids) {
  std::string s;
  for (const auto& id : ids) s += (s.empty() ? "" : ",") + std::to_string(id.get<int64_t>());
  return s;
}

// `env`: assignments for the command's environment ("NAME=value ..."), or "".
ProcessOutput ninfer_run(const std::string& args, const std::string& env = "") {
  return run_process(env + (env.empty() ? "" : " ") + std::string(NINFER_RUN_BIN) + " " + args);
}

json run_json(const std::string& args, const std::string& env = "", std::string* err = nullptr) {
  const ProcessOutput r = ninfer_run(args + " --json", env);
  EXPECT_EQ(r.status, 0) << args << "\n" << r.err;
  if (err) *err = r.err;
  return r.status == 0 ? json::parse(r.out) : json::object();
}

json reference(const std::string& fixture) {
  std::ifstream in(fixtures_dir() / fixture / "reference.json");
  return json::parse(in);
}

const fs::path& demo_checkpoint() { return ninfer::test::demo_checkpoint(NINFER_MAKE_CHECKPOINT_BIN); }

} // namespace

namespace {

// Greedy generation of every case of `fixture` against transformers' ids, with `env` in
// ninfer-run's environment; returns the last run's stderr.
std::string expect_reference_greedy_ids(const char* fixture, const std::string& env = "") {
  std::string err;
  const json ref = reference(fixture);
  for (size_t c = 0; c < ref["cases"].size(); ++c) {
    const json& cs = ref["cases"][c];
    const size_t n = cs["greedy_ids"].size();
    const json out = run_json("--checkpoint " + shell_quote((fixtures_dir() / fixture).string()) + " --prompt-ids " +
                                  ids_csv(cs["prompt_ids"]) + " --greedy --ignore-eos --max-new " + std::to_string(n),
                              env, &err);
    EXPECT_EQ(out["generated_ids"].size(), n) << fixture << " case " << c;
    if (out["generated_ids"].size() != n) continue;
    size_t compared = 0;
    for (size_t i = 0; i < n; ++i) {
      // A step whose top-2 margin is below 1e-2 may legitimately flip on rounding; after a
      // flip the sequences diverge (fixtures README).
      if (cs["greedy_top2_margin"][i].get<double>() <= 1e-2) break;
      EXPECT_EQ(out["generated_ids"][i], cs["greedy_ids"][i]) << fixture << " case " << c << " step " << i;
      ++compared;
    }
    EXPECT_GT(compared, 0u) << fixture << " case " << c;
    EXPECT_EQ(out["finish_reason"], "length");
  }
  return err;
}

} // namespace

TEST(NinferRun, GreedyIdsMatchTransformersOnEveryFixture) {
  for (const char* fixture : {"tiny-qwen3", "tiny-qwen3_5", "tiny-qwen3_5-long", "tiny-qwen3_5-vl-layout"})
    expect_reference_greedy_ids(fixture);
}

// NINFER_UNFUSED_OPS (an A/B switch, docs/architecture.md) changes the route, never the answer:
// with the fused ops routed to their unfused forms, the model runs the ops they fuse and still
// produces transformers' greedy ids, and says on stderr that the switch is on.
TEST(NinferRun, UnfusedOpsSwitchKeepsTheReferenceIds) {
  const std::string env =
      "NINFER_UNFUSED_OPS=norm_linear,head_norm_rope_append,head_norm_rope,conv_l2_norm,gated_delta_step";
  for (const char* fixture : {"tiny-qwen3", "tiny-qwen3_5"}) {
    const std::string err = expect_reference_greedy_ids(fixture, env);
    EXPECT_NE(err.find("the fused ops named here run as the ops they fuse"), std::string::npos) << fixture << ": " << err;
  }
}

TEST(NinferRun, EchoLogprobsAreTheReferenceDistribution) {
  const json ref = reference("tiny-qwen3");
  const SafetensorsFile logits = SafetensorsFile::open(fixtures_dir() / "tiny-qwen3" / "reference.safetensors");
  const json& cs = ref["cases"][2];
  const TensorView& rows = logits.tensor("case2.prompt_logits"); // [prompt, vocab] float32
  const int64_t vocab = rows.shape[1];
  const float* data = static_cast<const float*>(rows.data);
  const json out = run_json("--checkpoint " + shell_quote((fixtures_dir() / "tiny-qwen3").string()) +
                            " --prompt-ids " + ids_csv(cs["prompt_ids"]) + " --greedy --max-new 1 --logprobs 3 --echo");
  ASSERT_EQ(out["prompt_top_logprobs"].size(), cs["prompt_ids"].size());
  for (size_t i = 0; i < cs["prompt_ids"].size(); ++i) {
    const float* row = data + i * vocab;
    double mx = row[0], sum = 0;
    for (int64_t v = 0; v < vocab; ++v) mx = std::max<double>(mx, row[v]);
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(row[v] - mx);
    const double lse = mx + std::log(sum);
    const json& top = out["prompt_top_logprobs"][i];
    ASSERT_EQ(top.size(), 3u);
    for (const auto& pair : top) {
      const int64_t id = pair[0];
      EXPECT_NEAR(pair[1].get<double>(), row[id] - lse, kLogprobTolerance) << "position " << i << " id " << id;
    }
    // The first entry is the reference's argmax (ties aside: then both ids carry the same value).
    const int64_t best = top[0][0];
    EXPECT_NEAR(row[best], mx, kLogprobTolerance) << "position " << i;
    // The prompt's own next token, scored whether or not it is among the top 3.
    if (i + 1 < cs["prompt_ids"].size()) {
      const int64_t next = cs["prompt_ids"][i + 1];
      EXPECT_NEAR(out["prompt_logprobs"][i].get<double>(), row[next] - lse, kLogprobTolerance) << "position " << i;
    }
  }
  EXPECT_EQ(out["prompt_logprobs"].size(), cs["prompt_ids"].size() - 1);
  // The first generated token's distribution is the last prompt row's.
  const json& gen_top = out["generated_top_logprobs"][0];
  EXPECT_EQ(gen_top, out["prompt_top_logprobs"].back());
}

TEST(NinferRun, SeededSamplingIsReproducible) {
  const std::string args = "--checkpoint " + shell_quote((fixtures_dir() / "tiny-qwen3_5").string()) +
                           " --prompt-ids 1,2,3,4 --temperature 1.0 --top-p 0.95 --max-new 24 --ignore-eos";
  const json a = run_json(args + " --seed 42"), b = run_json(args + " --seed 42"), c = run_json(args + " --seed 43");
  EXPECT_EQ(a["generated_ids"], b["generated_ids"]);
  EXPECT_EQ(a["seed"], 42);
  EXPECT_NE(a["generated_ids"], c["generated_ids"]); // 24 tokens from ~500: equal by chance ~never
}

TEST(NinferRun, TextIsTheTokenizersDecodeAndStopsTruncateExactly) {
  const std::string base = "--checkpoint " + shell_quote(demo_checkpoint().string()) +
                           " --prompt 'Once upon a time' --greedy --ignore-eos --max-new 40";
  const json full = run_json(base);
  ASSERT_EQ(full["generated_ids"].size(), 40u);
  // The streamed text equals a one-shot decode of the same ids by ninfer-tokenize.
  const ProcessOutput dec = run_process(std::string(NINFER_TOKENIZE_BIN) + " --tokenizer " +
                                        shell_quote(real_tokenizer().string()) + " --decode " +
                                        ids_csv(full["generated_ids"]) + " 2>/dev/null");
  ASSERT_EQ(dec.status, 0) << dec.err;
  std::string decoded = dec.out;
  if (!decoded.empty() && decoded.back() == '\n') decoded.pop_back();
  EXPECT_EQ(full["text"].get<std::string>(), decoded);

  // A stop string taken from the middle of that text ends generation right before it.
  const std::string text = full["text"];
  ASSERT_GT(text.size(), 24u);
  size_t start = text.size() / 2;
  while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
  size_t end = start + 3;
  while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
  const std::string stop = text.substr(start, end - start);
  const json stopped = run_json(base + " --stop " + shell_quote(stop));
  EXPECT_EQ(stopped["finish_reason"], "stop");
  EXPECT_EQ(stopped["stop_string"], stop);
  EXPECT_EQ(stopped["text"].get<std::string>(), text.substr(0, text.find(stop)));

  // A stop id ends generation before the id's first occurrence and is not included.
  const int64_t id = full["generated_ids"][5];
  const json by_id = run_json(base + " --stop-id " + std::to_string(id));
  size_t first = 0;
  while (full["generated_ids"][first] != id) ++first;
  EXPECT_EQ(by_id["finish_reason"], "stop");
  EXPECT_EQ(by_id["stop_token"], id);
  ASSERT_EQ(by_id["generated_ids"].size(), first);
  for (size_t i = 0; i < first; ++i) EXPECT_EQ(by_id["generated_ids"][i], full["generated_ids"][i]);
}

TEST(NinferRun, ChatPromptStreamsTextAndReportsOnStderr) {
  const ProcessOutput r = ninfer_run("--checkpoint " + shell_quote(demo_checkpoint().string()) +
                                     " --chat --no-think --prompt 'Hi' --max-new 8 --seed 3");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("RANDOM weights"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("prefill"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("decode"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("seed 3"), std::string::npos) << r.err;
}

TEST(NinferRun, BadInputIsAClearErrorWithNoOutputPresentedAsSuccess) {
  const std::string fx = " --checkpoint " + shell_quote((fixtures_dir() / "tiny-qwen3").string());
  const std::string demo = " --checkpoint " + shell_quote(demo_checkpoint().string());
  const fs::path scratch = fs::temp_directory_path() / ("ninfer-run-bad-" + std::to_string(::getpid()));
  fs::create_directories(scratch);
  std::ofstream(scratch / "missing.yaml") << "checkpoint: ./no-such-folder\n";
  std::ofstream(scratch / "mismatch.yaml") << "checkpoint: " << (fixtures_dir() / "tiny-qwen3").string()
                                           << "\ntokenizer: " << real_tokenizer().string() << "\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {fx + " --prompt-ids 1,2,3,4,5,6 --max-context 4", "context"},
      {fx + " --prompt-ids 1,2,3 --max-new 10 --max-context 8", "exceed the context"},
      {fx + " --prompt-ids 1,99999", "99999"},
      {fx + " --max-new 3", "no prompt"},
      {demo + " --prompt ''", "empty"},
      {fx + " --prompt 'hello'", "needs a tokenizer"},
      {demo + " --chat --prompt-ids 1,2", "--chat needs --prompt"},
      {fx + " --prompt-ids 1 --echo", "--echo needs --logprobs"},
      {"", "no model"},
      {" " + shell_quote((scratch / "missing.yaml").string()) + " --prompt-ids 1", "no-such-folder"},
      {" " + shell_quote((scratch / "mismatch.yaml").string()) + " --prompt-ids 1", "does not belong"},
      {fx + " --prompt-ids 1 --device cuda:7", "--device cuda:7"},
      {fx + " --prompt-ids 1 --temperature -1", "temperature"},
      {fx + " --prompt-ids 1 --no-such-flag", "no-such-flag"},
  };
  for (const auto& [args, want] : cases) {
    const ProcessOutput r = ninfer_run(args + " --json");
    EXPECT_NE(r.status, 0) << args;
    EXPECT_NE((r.err + r.out).find(want), std::string::npos) << args << "\nstderr: " << r.err;
    EXPECT_EQ(r.out.find("generated_ids"), std::string::npos) << args << ": printed a result";
  }
  // Asking for logprobs without --json (no place to print them).
  const ProcessOutput r = ninfer_run(fx + " --prompt-ids 1 --logprobs 2");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("need --json"), std::string::npos) << r.err;
  fs::remove_all(scratch);
}

// --spec mtp on the trained demo model: the greedy ids of the model's own reference
// (transformers' greedy continuations, models/qwen3_5-demo/reference.json) wherever its top-2
// margin is clear, with the rounds' counts in the JSON and the summary; the flags' refusals.
TEST(NinferRun, SpeculativeDecodingKeepsTheReferenceIdsAndReportsAcceptance) {
  const fs::path demo = source_dir() / "models/qwen3_5-demo";
  std::ifstream in(demo / "reference.json");
  const json ref = json::parse(in);
  for (int K : {1, 3}) {
    for (const json& c : ref["cases"]) {
      std::string err;
      const json j = run_json(fmt::format("--checkpoint {} --prompt-ids {} --greedy --ignore-eos --max-new {} --spec "
                                          "mtp --draft-tokens {} --device cpu",
                                          demo.string(), ids_csv(c["prompt_ids"]), c["greedy_ids"].size(), K),
                              "", &err);
      const auto got = j.value("generated_ids", json::array());
      ASSERT_EQ(got.size(), c["greedy_ids"].size()) << err;
      for (size_t i = 0; i < got.size(); ++i) {
        if (got[i] == c["greedy_ids"][i]) continue;
        EXPECT_LE(c["greedy_top2_margin"][i].get<double>(), 1e-2) << "K " << K << " token " << i;
        break;
      }
      const json& s = j.at("speculation");
      EXPECT_EQ(s.at("draft_tokens").get<int>(), K);
      EXPECT_EQ(s.at("acceptance_by_position").size(), static_cast<size_t>(K));
      EXPECT_GE(s.at("mean_accepted_length").get<double>(), 1.0);
      EXPECT_NE(err.find("speculation: "), std::string::npos) << err;
    }
  }
  const ProcessOutput bad_k = ninfer_run(fmt::format("--checkpoint {} --prompt hi --spec mtp --draft-tokens 6", demo.string()));
  EXPECT_EQ(bad_k.status, 2) << bad_k.err;
  const ProcessOutput none = ninfer_run(fmt::format("--checkpoint {} --prompt hi --spec none --draft-tokens 2", demo.string()));
  EXPECT_EQ(none.status, 2) << none.err;
  const ProcessOutput vocab_none = ninfer_run(fmt::format("--checkpoint {} --prompt hi --spec none --draft-vocab 100", demo.string()));
  EXPECT_EQ(vocab_none.status, 2) << vocab_none.err;
  const ProcessOutput vocab_big =
      ninfer_run(fmt::format("--checkpoint {} --prompt hi --spec mtp --draft-vocab 100000 --device cpu", demo.string()));
  EXPECT_EQ(vocab_big.status, 1) << vocab_big.err;
  EXPECT_NE(vocab_big.err.find("exceeds the model's vocabulary"), std::string::npos) << vocab_big.err;
  const ProcessOutput no_head = ninfer_run(fmt::format("--checkpoint {} --prompt-ids 1,2,3 --greedy --spec mtp --device cpu",
                                                       (fixtures_dir() / "tiny-qwen3_5").string()));
  EXPECT_EQ(no_head.status, 1);
  EXPECT_NE(no_head.err.find("mtp_num_hidden_layers"), std::string::npos) << no_head.err;
}
