// A manifest needs only `checkpoint:`; everything else has its documented default, and paths
// are resolved from the manifest's own folder.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <string>
#include <utility>

#include "manifest_test_util.hpp"
#include "test_support.hpp"

namespace ninfer::test {
namespace {

namespace fs = std::filesystem;

TEST(Manifest, OnlyCheckpointIsRequiredAndEveryDefaultHolds) {
  ScratchDir dir;
  const fs::path ckpt = dir.folder("checkpoints/Qwen3-8B");
  const fs::path file = dir.write("models/qwen3-8b.yaml", "checkpoint: ../checkpoints/Qwen3-8B\n");
  const Manifest m = load_manifest(file);

  EXPECT_EQ(m.source, file);
  EXPECT_EQ(m.checkpoint, ckpt.lexically_normal());
  EXPECT_TRUE(m.checkpoint.is_absolute());
  EXPECT_EQ(m.name, "Qwen3-8B");
  EXPECT_EQ(m.dtype, WeightDType::Auto);
  EXPECT_FALSE(m.tokenizer.has_value()) << "the checkpoint has no tokenizer.json";
  EXPECT_EQ(m.chat_template, ChatTemplate::Qwen);
  EXPECT_FALSE(m.runtime.max_context.has_value());
  EXPECT_EQ(m.runtime.max_concurrency, 4);
  EXPECT_EQ(m.runtime.prefill_chunk, 2048);
  EXPECT_FALSE(m.runtime.mixed_chunk.has_value()) << "unset: the model's cost rule";
  EXPECT_EQ(m.runtime.kv_dtype, KvDType::Auto);
  EXPECT_TRUE(m.runtime.cuda_graphs);
  // Unset: the memory plan decides (what the model supports and the memory allows).
  EXPECT_FALSE(m.runtime.memory_limit_gib.has_value());
  EXPECT_FALSE(m.runtime.kv_capacity.has_value());
  EXPECT_FALSE(m.runtime.kv_block_tokens.has_value());
  EXPECT_EQ(m.max_new_tokens, 512);
  const SamplingParams neutral;
  EXPECT_EQ(m.sampling.temperature, 1.0);
  EXPECT_EQ(m.sampling.top_p, 1.0);
  EXPECT_EQ(m.sampling.top_k, 0);
  EXPECT_EQ(m.sampling.min_p, 0.0);
  EXPECT_EQ(m.sampling.repetition_penalty, 1.0);
  EXPECT_EQ(m.sampling.presence_penalty, 0.0);
  EXPECT_EQ(m.sampling.frequency_penalty, 0.0);
  EXPECT_FALSE(m.sampling.seed.has_value());
  EXPECT_EQ(m.sampling.temperature, neutral.temperature);
  EXPECT_EQ(m.spec.method, SpecKind::None);
  EXPECT_EQ(m.spec.draft_tokens, 3) << "what an MTP method set without it takes";
  EXPECT_EQ(m.spec.draft_vocab, 0) << "the whole vocabulary";
  EXPECT_EQ(m.spec.draft_head, DraftHeadKind::LmHead) << "the model's own LM head rows";
  EXPECT_EQ(m.spec.max_batch, 0) << "no cap";
}

TEST(Manifest, TokenizerDefaultsToTheCheckpointsTokenizerJson) {
  ScratchDir dir;
  dir.folder("ck");
  const fs::path tok = dir.write("ck/tokenizer.json", "{}");
  const Manifest m = load_manifest(dir.write("m.yaml", "checkpoint: ck\n"));
  ASSERT_TRUE(m.tokenizer.has_value());
  EXPECT_EQ(*m.tokenizer, tok.lexically_normal());
}

TEST(Manifest, PathsAreRelativeToTheManifestNotTheWorkingDirectory) {
  ScratchDir dir;
  const fs::path ckpt = dir.folder("a/checkpoints/Tiny");
  const fs::path tok = dir.write("a/tok/tokenizer.json", "{}");
  const fs::path file =
      dir.write("a/b/c/m.yaml", "checkpoint: ../../checkpoints/Tiny/\ntokenizer: ../../tok/tokenizer.json\n");
  const fs::path old_cwd = fs::current_path();
  fs::current_path(dir.folder("elsewhere"));
  Manifest m;
  try {
    m = load_manifest(fs::relative(file)); // a relative manifest path, from another folder
  } catch (...) {
    fs::current_path(old_cwd);
    throw;
  }
  fs::current_path(old_cwd);
  EXPECT_EQ(m.checkpoint, ckpt.lexically_normal());
  EXPECT_EQ(m.name, "Tiny") << "a trailing slash must not empty the default name";
  ASSERT_TRUE(m.tokenizer.has_value());
  EXPECT_EQ(*m.tokenizer, tok.lexically_normal());

  // Absolute paths are taken as they are.
  const Manifest abs = load_manifest(dir.write("m2.yaml", "checkpoint: " + ckpt.string() + "\n"));
  EXPECT_EQ(abs.checkpoint, ckpt.lexically_normal());
}

// Every key the schema knows, set to a value that is not its default.
const char* kEveryKey = R"(checkpoint: ck
name: my-model
dtype: bfloat16
tokenizer: tok.json
chat_template: none
runtime:
  max_context: 8192
  max_concurrency: 2
  prefill_chunk: 1024
  mixed_chunk: 48
  kv_dtype: float32
  cuda_graphs: false
  memory_limit: 31.5
  kv_capacity: 65536
  kv_block_tokens: 128
sampling:
  temperature: 0.6
  top_p: 0.95
  top_k: 20
  min_p: 0.05
  repetition_penalty: 1.1
  presence_penalty: 0.5
  frequency_penalty: -0.25
  seed: 1234
  max_new_tokens: 64
spec:
  method: mtp
  draft_tokens: 2
  draft_vocab: 4096
  draft_head: int4
  max_batch: 2
)";

TEST(Manifest, EveryKeyIsRead) {
  ScratchDir dir;
  dir.folder("ck");
  dir.write("tok.json", "{}");
  const Manifest m = load_manifest(dir.write("m.yaml", kEveryKey));
  EXPECT_EQ(m.name, "my-model");
  EXPECT_EQ(m.dtype, WeightDType::BFloat16);
  EXPECT_EQ(m.tokenizer, (dir.path() / "tok.json").lexically_normal());
  EXPECT_EQ(m.chat_template, ChatTemplate::None);
  EXPECT_EQ(m.runtime.max_context, 8192);
  EXPECT_EQ(m.runtime.max_concurrency, 2);
  EXPECT_EQ(m.runtime.prefill_chunk, 1024);
  EXPECT_EQ(m.runtime.mixed_chunk, 48);
  EXPECT_EQ(m.runtime.kv_dtype, KvDType::Float32);
  EXPECT_FALSE(m.runtime.cuda_graphs);
  EXPECT_EQ(m.runtime.memory_limit_gib, 31.5);
  EXPECT_EQ(m.runtime.kv_capacity, 65536);
  EXPECT_EQ(m.runtime.kv_block_tokens, 128);
  EXPECT_EQ(m.sampling.temperature, 0.6);
  EXPECT_EQ(m.sampling.top_p, 0.95);
  EXPECT_EQ(m.sampling.top_k, 20);
  EXPECT_EQ(m.sampling.min_p, 0.05);
  EXPECT_EQ(m.sampling.repetition_penalty, 1.1);
  EXPECT_EQ(m.sampling.presence_penalty, 0.5);
  EXPECT_EQ(m.sampling.frequency_penalty, -0.25);
  EXPECT_EQ(m.sampling.seed, 1234u);
  EXPECT_EQ(m.max_new_tokens, 64);
  EXPECT_EQ(m.spec.method, SpecKind::Mtp);
  EXPECT_EQ(m.spec.draft_tokens, 2);
  EXPECT_EQ(m.spec.draft_vocab, 4096);
  EXPECT_EQ(m.spec.draft_head, DraftHeadKind::Int4);
  EXPECT_STREQ(to_string(m.spec.draft_head), "int4");
  EXPECT_EQ(m.spec.max_batch, 2);

  // Where each key was set, for checks made after loading.
  const std::string file = (dir.path() / "m.yaml").string();
  EXPECT_EQ(m.where("runtime.max_context"), file + ":7: runtime.max_context");
  EXPECT_EQ(m.where("sampling.seed"), file + ":24: sampling.seed");
  EXPECT_EQ(m.where("checkpoint"), file + ":1: checkpoint");
}

// Every KV cache element type the schema lists reads as its own value (the engine honours each:
// ModelOptions::kv_cache).
TEST(Manifest, EveryKvDtypeIsRead) {
  ScratchDir dir;
  dir.folder("ck");
  for (const auto& [text, want] : {std::pair{"auto", KvDType::Auto}, std::pair{"float32", KvDType::Float32},
                                   std::pair{"float16", KvDType::Float16}, std::pair{"bfloat16", KvDType::BFloat16},
                                   std::pair{"int8", KvDType::Int8}, std::pair{"fp8", KvDType::Fp8},
                                   std::pair{"int4r", KvDType::Int4r}}) {
    const Manifest m = load_manifest(dir.write("m.yaml", std::string("checkpoint: ck\nruntime:\n  kv_dtype: ") + text + "\n"));
    EXPECT_EQ(m.runtime.kv_dtype, want) << text;
    EXPECT_STREQ(to_string(m.runtime.kv_dtype), text);
  }
}

TEST(Manifest, WhereNamesDefaultsToo) {
  ScratchDir dir;
  dir.folder("ck");
  const fs::path file = dir.write("m.yaml", "checkpoint: ck\n");
  EXPECT_EQ(load_manifest(file).where("runtime.max_context"), file.string() + ": runtime.max_context (default)");
  const Manifest implicit = implicit_manifest(dir.path() / "ck");
  EXPECT_NE(implicit.where("runtime.max_context").find("--checkpoint"), std::string::npos);
}

// The test above covers exactly the schema's keys: a key added to the schema must be read
// (and tested) too.
TEST(Manifest, EveryKeyTestCoversTheWholeSchema) {
  std::ifstream in(data_dir() / "schemas" / "manifest.schema.json");
  const nlohmann::json schema = nlohmann::json::parse(in);
  std::set<std::string> schema_keys;
  for (const auto& [k, sub] : schema["properties"].items()) {
    if (sub.contains("properties"))
      for (const auto& [k2, sub2] : sub["properties"].items()) schema_keys.insert(k + "." + k2);
    else
      schema_keys.insert(k);
  }
  std::set<std::string> tested;
  const YAML::Node doc = YAML::Load(kEveryKey);
  for (const auto& kv : doc) {
    const std::string k = kv.first.as<std::string>();
    if (kv.second.IsMap())
      for (const auto& kv2 : kv.second) tested.insert(k + "." + kv2.first.as<std::string>());
    else
      tested.insert(k);
  }
  EXPECT_EQ(tested, schema_keys);
}

TEST(Manifest, ImplicitManifestForACheckpointFolder) {
  ScratchDir dir;
  const fs::path ckpt = dir.folder("Qwen3-0.6B");
  const fs::path tok = dir.write("Qwen3-0.6B/tokenizer.json", "{}");
  const Manifest m = implicit_manifest(ckpt.string() + "/");
  EXPECT_TRUE(m.source.empty());
  EXPECT_EQ(m.checkpoint, ckpt.lexically_normal());
  EXPECT_EQ(m.name, "Qwen3-0.6B");
  EXPECT_EQ(m.tokenizer, tok.lexically_normal());
  EXPECT_EQ(m.runtime.max_concurrency, 4);
  EXPECT_EQ(m.max_new_tokens, 512);

  try {
    implicit_manifest(dir.path() / "nope");
    ADD_FAILURE() << "a missing folder was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((dir.path() / "nope").string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--checkpoint"), std::string::npos) << e.what();
  }
}

} // namespace
} // namespace ninfer::test
