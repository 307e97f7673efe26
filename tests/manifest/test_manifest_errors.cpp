// Every manifest problem is an error naming the file, the line and the key, and saying what
// was expected.
#include <gtest/gtest.h>

#include "manifest_test_util.hpp"
#include "ninfer/models/model_setup.hpp"

namespace ninfer::test {
namespace {

namespace fs = std::filesystem;

// The message starts "FILE:LINE" (and names `key`), and contains each of `also`.
void expect_message(const std::string& msg, const fs::path& file, int line, const std::string& key,
                    std::initializer_list<std::string> also = {}) {
  const std::string at = file.string() + ":" + std::to_string(line);
  EXPECT_EQ(msg.rfind(at, 0), 0u) << "expected the message to start with " << at << ": " << msg;
  if (!key.empty()) EXPECT_NE(msg.find(key), std::string::npos) << "key " << key << " not named: " << msg;
  for (const auto& s : also) EXPECT_NE(msg.find(s), std::string::npos) << "'" << s << "' missing: " << msg;
}

class ManifestErrors : public ::testing::Test {
 protected:
  void SetUp() override { dir_.folder("ck"); }
  fs::path manifest(const std::string& text) { return dir_.write("m.yaml", text); }
  ScratchDir dir_;
};

TEST_F(ManifestErrors, MalformedYamlGivesLineAndColumn) {
  const auto f = manifest("checkpoint: ck\n  name: b\n");
  expect_message(load_error(f), f, 2, "", {":2:7", "YAML syntax error"});
}

TEST_F(ManifestErrors, WrongTypeSaysWhatWasExpected) {
  auto f = manifest("checkpoint: ck\nruntime:\n  max_concurrency: four\n");
  expect_message(load_error(f), f, 3, "runtime.max_concurrency", {"whole number", "'four'"});
  f = manifest("checkpoint: ck\nruntime:\n  cuda_graphs: maybe\n");
  expect_message(load_error(f), f, 3, "runtime.cuda_graphs", {"true or false", "'maybe'"});
  f = manifest("checkpoint: ck\nruntime:\n  max_context: \"4096\"\n");
  expect_message(load_error(f), f, 3, "runtime.max_context", {"whole number"});
  f = manifest("checkpoint: ck\nsampling:\n  temperature: hot\n");
  expect_message(load_error(f), f, 3, "sampling.temperature", {"a number", "'hot'"});
  f = manifest("checkpoint: ck\nruntime: 4\n");
  expect_message(load_error(f), f, 2, "runtime", {"mapping"});
  f = manifest("checkpoint: [a, b]\n");
  expect_message(load_error(f), f, 1, "checkpoint", {"text value", "a list"});
  f = manifest("checkpoint: ck\nname:\n");
  expect_message(load_error(f), f, 2, "name", {"text value", "nothing"});
}

TEST_F(ManifestErrors, UnknownKeySuggestsTheClosestKnownOne) {
  auto f = manifest("checkpoint: ck\nruntime:\n  prefill_chunk: 512\n  max_concurency: 2\n");
  expect_message(load_error(f), f, 4, "runtime.max_concurency",
                 {"unknown key", "did you mean 'runtime.max_concurrency'"});
  f = manifest("checkpoint: ck\ndtpye: bfloat16\n");
  expect_message(load_error(f), f, 2, "dtpye", {"unknown key", "did you mean 'dtype'"});
  // Right key, wrong block.
  f = manifest("checkpoint: ck\ntemperature: 0.7\n");
  expect_message(load_error(f), f, 2, "temperature", {"unknown key", "belongs under 'sampling:'"});
  // Nothing close: the known keys are listed.
  f = manifest("checkpoint: ck\nquantisation: int4\n");
  expect_message(load_error(f), f, 2, "quantisation", {"unknown key", "checkpoint, ", "runtime"});
}

TEST_F(ManifestErrors, BadEnumListsTheChoices) {
  auto f = manifest("checkpoint: ck\ndtype: fp8\n");
  expect_message(load_error(f), f, 2, "dtype", {"auto, float32, bfloat16, float16", "'fp8'"});
  f = manifest("checkpoint: ck\nruntime:\n  kv_dtype: int2\n");
  expect_message(load_error(f), f, 3, "runtime.kv_dtype", {"auto, float32, float16, bfloat16, int8, fp8, int4r", "'int2'"});
  f = manifest("checkpoint: ck\nchat_template: chatml\n");
  expect_message(load_error(f), f, 2, "chat_template", {"qwen, none", "'chatml'"});
}

TEST_F(ManifestErrors, OutOfRangeValuesStateTheBound) {
  auto f = manifest("checkpoint: ck\nsampling:\n  top_p: 1.5\n");
  expect_message(load_error(f), f, 3, "sampling.top_p", {"<= 1", "'1.5'"});
  f = manifest("checkpoint: ck\nsampling:\n  top_p: 0\n");
  expect_message(load_error(f), f, 3, "sampling.top_p", {"> 0"});
  f = manifest("checkpoint: ck\nruntime:\n  max_concurrency: 0\n");
  expect_message(load_error(f), f, 3, "runtime.max_concurrency", {">= 1"});
  f = manifest("checkpoint: ck\nsampling:\n  temperature: -1\n");
  expect_message(load_error(f), f, 3, "sampling.temperature", {">= 0"});
  f = manifest("checkpoint: ck\nruntime:\n  memory_limit: 0\n");
  expect_message(load_error(f), f, 3, "runtime.memory_limit", {"> 0", "'0'"});
  f = manifest("checkpoint: ck\nspec:\n  draft_tokens: 6\n");
  expect_message(load_error(f), f, 3, "spec.draft_tokens", {"<= 5", "'6'"});
  f = manifest("checkpoint: ck\nspec:\n  draft_vocab: -1\n");
  expect_message(load_error(f), f, 3, "spec.draft_vocab", {">= 0", "'-1'"});
  f = manifest("checkpoint: ck\nspec:\n  draft_head: int8\n");
  expect_message(load_error(f), f, 3, "spec.draft_head", {"lm_head, int4", "'int8'"});
  f = manifest("checkpoint: ck\nspec:\n  max_batch: -2\n");
  expect_message(load_error(f), f, 3, "spec.max_batch", {">= 0", "'-2'"});
  f = manifest("checkpoint: ck\nspec:\n  method: eagle\n");
  expect_message(load_error(f), f, 3, "spec.method", {"none, mtp", "'eagle'"});
}

// A key of several forms names each of them.
TEST_F(ManifestErrors, KvCapacityIsTokensOrAuto) {
  for (const char* bad : {"0", "lots", "-5"}) {
    const auto f = manifest(std::string("checkpoint: ck\nruntime:\n  kv_capacity: ") + bad + "\n");
    expect_message(load_error(f), f, 3, "runtime.kv_capacity", {"a whole number >= 1 or auto", bad});
  }
}

TEST_F(ManifestErrors, KvBlockTokensIsOneOfThePowersOfTwo) {
  for (const char* bad : {"100", "16", "2048"}) {
    const auto f = manifest(std::string("checkpoint: ck\nruntime:\n  kv_block_tokens: ") + bad + "\n");
    expect_message(load_error(f), f, 3, "runtime.kv_block_tokens", {bad});
  }
}

// Two keys that contradict each other: the error names both where they were set.
TEST_F(ManifestErrors, MixedChunkPastThePrefillChunkNamesBothLines) {
  const auto f = manifest("checkpoint: ck\nruntime:\n  prefill_chunk: 64\n  mixed_chunk: 128\n");
  const Manifest m = load_manifest(f);
  std::string msg;
  try {
    model_options(m, 1, std::nullopt, std::nullopt);
  } catch (const Error& e) {
    msg = e.what();
  }
  expect_message(msg, f, 4, "runtime.mixed_chunk 128", {f.string() + ":3: runtime.prefill_chunk 64", "at most 64"});
  // A flag that raises the prompt chunk resolves it; one that sets the mixed chunk is named as a flag.
  EXPECT_EQ(model_options(m, 1, 256, std::nullopt).mixed_chunk, 128);
  try {
    model_options(m, 1, std::nullopt, 96);
    ADD_FAILURE() << "--mixed-chunk 96 past the manifest's prefill_chunk 64 was taken";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--mixed-chunk 96 exceeds " + f.string() + ":3:", 0), 0u) << e.what();
  }
}

TEST_F(ManifestErrors, MissingCheckpointKey) {
  const auto f = manifest("name: x\ndtype: auto\n");
  expect_message(load_error(f), f, 1, "checkpoint", {"required"});
  const auto empty = manifest("");
  expect_message(load_error(empty), empty, 1, "checkpoint", {"empty"});
}

TEST_F(ManifestErrors, MissingCheckpointFolderNamesTheResolvedPath) {
  const auto f = dir_.write("models/m.yaml", "name: x\ncheckpoint: ../checkpoints/Qwen3-8B\n");
  const std::string msg = load_error(f);
  expect_message(msg, f, 2, "checkpoint",
                 {(dir_.path() / "checkpoints" / "Qwen3-8B").lexically_normal().string(), "not found",
                  "../checkpoints/Qwen3-8B"});
  // A file where a folder belongs.
  dir_.write("file-not-folder", "x");
  const auto g = manifest("checkpoint: file-not-folder\n");
  expect_message(load_error(g), g, 1, "checkpoint", {"folder"});
}

TEST_F(ManifestErrors, MissingTokenizerFileNamesTheResolvedPath) {
  const auto f = manifest("checkpoint: ck\ntokenizer: tok/tokenizer.json\n");
  expect_message(load_error(f), f, 2, "tokenizer",
                 {(dir_.path() / "tok" / "tokenizer.json").lexically_normal().string(), "not found"});
}

TEST_F(ManifestErrors, MissingManifestFile) {
  const auto f = dir_.path() / "absent.yaml";
  const std::string msg = load_error(f);
  EXPECT_NE(msg.find(f.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("not found"), std::string::npos) << msg;
}

} // namespace
} // namespace ninfer::test
