// Checkpoint folders written to hurt: counts that would allocate gigabytes, shard names that
// leave the folder, FIFOs where files belong, deep nesting. Each must end in an ninfer::Error
// naming the file and the key or limit, within seconds, before anything large is allocated.
#include <gtest/gtest.h>

#include "hostile_files.hpp"
#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/checkpoint/model_config.hpp"
#include "ninfer/support/error.hpp"
#include "raw_safetensors.hpp"
#include "test_support.hpp"

namespace ninfer {
namespace {

using nlohmann::json;
using test::TempDir;

class CheckpointHostile : public ::testing::Test {
 protected:
  // dir_/ck holds the tiny-qwen3 config; dir_ itself is "outside the checkpoint".
  void SetUp() override {
    std::filesystem::create_directories(ck());
    test::copy_fixture_config("tiny-qwen3", ck());
  }
  std::filesystem::path ck() const { return dir_ / "ck"; }
  test::RawTensors fixture() const {
    return test::read_raw_safetensors(test::fixtures_dir() / "tiny-qwen3" / "model.safetensors");
  }
  std::string open_error(const std::filesystem::path& fifo = {}) {
    return test::error_within(10, [&] { Checkpoint::open(ck()); }, fifo);
  }
  std::string config_error(const json& cfg) {
    test::write_json(ck() / "config.json", cfg);
    return test::error_within(10, [&] { load_model_config(ck()); });
  }
  json config() const { return test::read_json(test::fixtures_dir() / "tiny-qwen3" / "config.json"); }
  static void expect_has(const std::string& msg, std::initializer_list<std::string> parts) {
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg.substr(0, 400);
  }
  // An index that puts every fixture tensor in `shard` (written there when `write`).
  void index_to(const std::string& shard) {
    json map = json::object();
    for (const auto& [n, _] : fixture()) map[n] = shard;
    test::write_json(ck() / "model.safetensors.index.json", {{"weight_map", map}});
  }
  TempDir dir_;
};

TEST_F(CheckpointHostile, BillionLayersIsRefusedNamingFileKeyAndLimit) {
  json j = config();
  j.erase("layer_types");  // Qwen3 configs usually have none: one entry per layer is derived
  j["num_hidden_layers"] = 1000000000;
  const std::string msg = config_error(j);
  expect_has(msg, {(ck() / "config.json").string(), "'num_hidden_layers'", "1000000000", "1024"});
  // Qwen3.5 derives its layer list from full_attention_interval instead.
  j = test::read_json(test::fixtures_dir() / "tiny-qwen3_5" / "config.json");
  j.erase("layer_types");
  j["num_hidden_layers"] = 1000000000;
  expect_has(config_error(j), {(ck() / "config.json").string(), "'num_hidden_layers'", "1024"});
  j["num_hidden_layers"] = -5;
  expect_has(config_error(j), {"'num_hidden_layers'"});
  j = config();
  j.erase("layer_types");
  j["num_hidden_layers"] = -5;  // a negative count would be a huge size_t
  expect_has(config_error(j), {"'num_hidden_layers'", "between 1 and 1024"});
}

TEST_F(CheckpointHostile, IntegersBeyondTwoToThe31AreRefused) {
  json j = config();
  j["hidden_size"] = int64_t{1} << 40;
  expect_has(config_error(j), {(ck() / "config.json").string(), "'hidden_size'", "2147483647"});
  j = config();
  j["vocab_size"] = 1e300;  // a float: casting it to an integer would be undefined
  expect_has(config_error(j), {"'vocab_size'"});
  j = config();
  j["eos_token_id"] = json::array({1, -(int64_t{1} << 50)});
  expect_has(config_error(j), {"'eos_token_id'"});
}

// Found with fuzz-config_json under UBSan: the conv width 2*NK*KD + NV*VD overflowed int64.
TEST_F(CheckpointHostile, DimensionsThatWouldOverflowTensorShapesAreRefused) {
  json j = test::read_json(test::fixtures_dir() / "tiny-qwen3_5" / "config.json");
  for (const char* k : {"linear_num_key_heads", "linear_key_head_dim", "linear_num_value_heads", "linear_value_head_dim"})
    j[k] = 2147483647;
  expect_has(config_error(j), {(ck() / "config.json").string(), "linear_num_key_heads", "1048576"});
  j = config();
  j["head_dim"] = 2000000;
  expect_has(config_error(j), {"head_dim", "1048576"});
  j = config();
  j["max_position_embeddings"] = 10000000;  // long contexts are not a tensor dimension
  test::write_json(ck() / "config.json", j);
  EXPECT_EQ(load_model_config(ck()).max_position_embeddings, 10000000);
}

TEST_F(CheckpointHostile, ValuesInMessagesAreShortened) {
  json j = config();
  j["num_attention_heads"] = std::string(1 << 20, 'x');
  const std::string msg = config_error(j);
  expect_has(msg, {"'num_attention_heads'"});
  EXPECT_LT(msg.size(), 1000u);
}

TEST_F(CheckpointHostile, DeepNestingInConfigIsRefused) {
  test::write_file_bytes(ck() / "config.json",
                         "{\"model_type\": \"qwen3\", \"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}");
  expect_has(test::error_within(10, [&] { load_model_config(ck()); }),
             {(ck() / "config.json").string(), "nested", "64"});
}

TEST_F(CheckpointHostile, OversizedConfigIsRefusedBeforeReading) {
  test::write_file_bytes(ck() / "config.json", "{\"model_type\": \"qwen3\", \"x\": \"" + std::string(17u << 20, 'x') + "\"}");
  expect_has(test::error_within(10, [&] { load_model_config(ck()); }), {(ck() / "config.json").string(), "16 MiB"});
}

TEST_F(CheckpointHostile, FifoConfigIsRefusedWithoutBlocking) {
  std::filesystem::remove(ck() / "config.json");
  test::make_fifo(ck() / "config.json");
  expect_has(test::error_within(10, [&] { load_model_config(ck()); }, ck() / "config.json"),
             {(ck() / "config.json").string(), "not a regular file"});
}

TEST_F(CheckpointHostile, ShardOutsideTheFolderIsRefused) {
  // A valid shard one folder up: loading it would read weights the checkpoint does not own.
  test::write_raw_safetensors(dir_ / "elsewhere.safetensors", fixture());
  for (const std::string shard : {std::string("../elsewhere.safetensors"), (dir_ / "elsewhere.safetensors").string(),
                                  std::string("sub/../../elsewhere.safetensors"), std::string(".."), std::string("")}) {
    index_to(shard);
    expect_has(open_error(), {"model.safetensors.index.json", "weight_map", "'" + shard + "'", "plain file name"});
  }
}

TEST_F(CheckpointHostile, FifoShardIsRefusedWithoutBlocking) {
  test::make_fifo(ck() / "model.safetensors");
  expect_has(open_error(ck() / "model.safetensors"), {(ck() / "model.safetensors").string(), "not a regular file"});
  std::filesystem::remove(ck() / "model.safetensors");
  test::make_fifo(ck() / "s1.safetensors");
  index_to("s1.safetensors");
  expect_has(open_error(ck() / "s1.safetensors"), {(ck() / "s1.safetensors").string(), "not a regular file"});
  std::filesystem::remove(ck() / "model.safetensors.index.json");
  test::make_fifo(ck() / "model.safetensors.index.json");
  expect_has(open_error(ck() / "model.safetensors.index.json"),
             {(ck() / "model.safetensors.index.json").string(), "not a regular file"});
}

TEST_F(CheckpointHostile, AFolderNamedLikeAShardIsRefused) {
  std::filesystem::create_directories(ck() / "model.safetensors");
  expect_has(open_error(), {(ck() / "model.safetensors").string(), "not a regular file"});
}

TEST_F(CheckpointHostile, DeeplyNestedSafetensorsHeaderIsRefused) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  test::write_raw_file(ck() / "model.safetensors",
                       R"({"model.norm.weight": {"dtype": "F32", "shape": )" + deep + R"(, "data_offsets": [0, 4]}})",
                       std::string(4, '\0'));
  expect_has(open_error(), {"truncated or corrupt file", (ck() / "model.safetensors").string(), "nested"});
}

TEST_F(CheckpointHostile, HeaderValuesInMessagesAreShortened) {
  test::write_raw_file(ck() / "model.safetensors",
                       R"({"model.norm.weight": {"dtype": "F32", "shape": [")" + std::string(1 << 20, 'x') +
                           R"("], "data_offsets": [0, 4]}})",
                       std::string(4, '\0'));
  const std::string msg = open_error();
  expect_has(msg, {"truncated or corrupt file", "model.norm.weight", "shape"});
  EXPECT_LT(msg.size(), 1000u);
}

} // namespace
} // namespace ninfer
