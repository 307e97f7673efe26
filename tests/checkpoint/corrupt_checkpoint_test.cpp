// Broken checkpoints written here byte by byte: each must give an ninfer::Error whose message
// names the file and, where there is one, the tensor.
#include <gtest/gtest.h>

#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/checkpoint/expected_tensors.hpp"
#include "ninfer/support/error.hpp"
#include "raw_safetensors.hpp"
#include "test_support.hpp"

namespace ninfer {
namespace {

using test::RawTensors;
using test::TempDir;

class CheckpointCorrupt : public ::testing::Test {
 protected:
  void SetUp() override { test::copy_fixture_config("tiny-qwen3", dir_.path()); }
  std::filesystem::path weights() const { return dir_ / "model.safetensors"; }
  RawTensors fixture() const {
    return test::read_raw_safetensors(test::fixtures_dir() / "tiny-qwen3" / "model.safetensors");
  }
  // The open error's message; fails the test if open succeeds or throws something else.
  std::string open_error() {
    try {
      Checkpoint::open(dir_.path());
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "Checkpoint::open succeeded on a broken checkpoint";
    return "";
  }
  static void expect_mentions(const std::string& msg, std::initializer_list<std::string> parts) {
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
  TempDir dir_;
};

TEST_F(CheckpointCorrupt, TruncatedFile) {
  const std::string full = test::read_file_bytes(test::fixtures_dir() / "tiny-qwen3" / "model.safetensors");
  test::write_file_bytes(weights(), full.substr(0, full.size() / 2));
  const std::string msg = open_error();
  expect_mentions(msg, {"truncated or corrupt file", weights().string(), "tensor ", "data_offsets"});
}

TEST_F(CheckpointCorrupt, ShorterThanTheHeaderLength) {
  test::write_file_bytes(weights(), "abc");
  expect_mentions(open_error(), {"truncated or corrupt file", weights().string()});
}

TEST_F(CheckpointCorrupt, HeaderLengthBeyondTheFile) {
  test::write_raw_file(weights(), "{}", "", 1 << 20);
  expect_mentions(open_error(), {"truncated or corrupt file", weights().string(), "header length"});
}

TEST_F(CheckpointCorrupt, HeaderNotJson) {
  test::write_raw_file(weights(), "{\"model.norm.weight\": {\"dtype\": ", "");
  expect_mentions(open_error(), {"truncated or corrupt file", weights().string(), "not valid JSON"});
}

TEST_F(CheckpointCorrupt, OffsetsOutOfRange) {
  test::write_raw_file(weights(),
                       R"({"model.norm.weight": {"dtype": "F32", "shape": [64], "data_offsets": [0, 256]}})",
                       std::string(100, '\0'));
  expect_mentions(open_error(), {"truncated or corrupt file", weights().string(), "model.norm.weight"});
}

TEST_F(CheckpointCorrupt, OffsetsReversed) {
  test::write_raw_file(weights(), R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})",
                       std::string(16, '\0'));
  expect_mentions(open_error(), {weights().string(), "tensor a"});
}

TEST_F(CheckpointCorrupt, OverlappingTensors) {
  test::write_raw_file(weights(),
                       R"({"x.one": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                           "x.two": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})",
                       std::string(24, '\0'));
  expect_mentions(open_error(), {"truncated or corrupt file", weights().string(), "x.one", "x.two", "overlap"});
}

TEST_F(CheckpointCorrupt, ByteCountDisagreesWithShape) {
  test::write_raw_file(weights(), R"({"model.norm.weight": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}})",
                       std::string(8, '\0'));
  expect_mentions(open_error(), {"truncated or corrupt file", weights().string(), "model.norm.weight", "16 bytes"});
}

TEST_F(CheckpointCorrupt, MissingHeaderFields) {
  test::write_raw_file(weights(), R"({"model.norm.weight": {"shape": [4], "data_offsets": [0, 16]}})",
                       std::string(16, '\0'));
  expect_mentions(open_error(), {weights().string(), "model.norm.weight", "dtype"});
}

TEST_F(CheckpointCorrupt, UnsupportedDtype) {
  RawTensors raw = fixture();
  raw["model.norm.weight"] = {"F64", {64}, std::string(512, '\0')};
  test::write_raw_safetensors(weights(), raw);
  expect_mentions(open_error(), {weights().string(), "model.norm.weight", "F64", "F32, BF16"});
}

// A dtype ninfer reads, but not for a plain weight: a norm stored as F8_E4M3 (or as integers)
// is refused by name when the checkpoint is checked, not loaded as garbage.
TEST_F(CheckpointCorrupt, APlainWeightInAQuantizedOrIntegerDtypeIsRefused) {
  for (const auto& [dtype, bytes] : {std::pair{"F8_E4M3", 64}, std::pair{"I32", 256}}) {
    RawTensors raw = fixture();
    raw["model.norm.weight"] = {dtype, {64}, std::string(static_cast<size_t>(bytes), '\x38')};
    test::write_raw_safetensors(weights(), raw);
    const Checkpoint ck = Checkpoint::open(dir_.path());
    try {
      require_all(ck);
      ADD_FAILURE() << dtype << ": no error";
    } catch (const Error& e) {
      expect_mentions(e.what(), {"model.norm.weight", dtype, "F32, BF16 or F16"});
    }
  }
}

TEST_F(CheckpointCorrupt, MissingTensor) {
  RawTensors raw = fixture();
  raw.erase("model.layers.1.mlp.down_proj.weight");
  test::write_raw_safetensors(weights(), raw);
  const Checkpoint ck = Checkpoint::open(dir_.path()); // a missing tensor is found when required
  try {
    ck.tensor("model.layers.1.mlp.down_proj.weight");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    expect_mentions(e.what(), {"model.layers.1.mlp.down_proj.weight", "model.safetensors", "missing"});
  }
  try {
    require_all(ck);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    expect_mentions(e.what(), {"missing model.layers.1.mlp.down_proj.weight [64, 160]", dir_.path().string()});
  }
}

TEST_F(CheckpointCorrupt, WrongShape) {
  RawTensors raw = fixture();
  raw["model.layers.2.mlp.down_proj.weight"].shape = {160, 64}; // transposed: same bytes
  test::write_raw_safetensors(weights(), raw);
  const Checkpoint ck = Checkpoint::open(dir_.path());
  try {
    ck.require("model.layers.2.mlp.down_proj.weight", {64, 160});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    expect_mentions(e.what(), {weights().string(), "model.layers.2.mlp.down_proj.weight", "[160, 64]", "[64, 160]",
                               "config.json"});
  }
  try {
    require_all(ck);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    expect_mentions(e.what(), {"model.layers.2.mlp.down_proj.weight has shape [160, 64], expected [64, 160]",
                               "[hidden_size, intermediate_size]"});
  }
}

TEST_F(CheckpointCorrupt, UnknownModelType) {
  std::filesystem::copy_file(test::fixtures_dir() / "tiny-qwen3" / "model.safetensors", weights());
  auto cfg = test::read_json(dir_ / "config.json");
  cfg["model_type"] = "mistral";
  test::write_json(dir_ / "config.json", cfg);
  expect_mentions(open_error(), {(dir_ / "config.json").string(), "mistral", "qwen3_5_text"});
}

TEST_F(CheckpointCorrupt, MissingConfig) {
  std::filesystem::copy_file(test::fixtures_dir() / "tiny-qwen3" / "model.safetensors", weights());
  std::filesystem::remove(dir_ / "config.json");
  expect_mentions(open_error(), {(dir_ / "config.json").string(), "missing"});
}

TEST_F(CheckpointCorrupt, NoWeightFiles) {
  expect_mentions(open_error(), {dir_.path().string(), "model.safetensors.index.json"});
}

TEST_F(CheckpointCorrupt, IndexNamesAMissingShard) {
  std::filesystem::copy_file(test::fixtures_dir() / "tiny-qwen3" / "model.safetensors",
                             dir_ / "model-00001-of-00002.safetensors");
  nlohmann::json map = nlohmann::json::object();
  for (const auto& [n, _] : fixture()) map[n] = "model-00001-of-00002.safetensors";
  map["model.norm.weight"] = "model-00002-of-00002.safetensors";
  test::write_json(dir_ / "model.safetensors.index.json", {{"weight_map", map}});
  expect_mentions(open_error(), {"model.safetensors.index.json", "model-00002-of-00002.safetensors", "incomplete"});
}

TEST_F(CheckpointCorrupt, IndexDisagreesWithShards) {
  RawTensors raw = fixture(), a, b;
  nlohmann::json map = nlohmann::json::object();
  for (auto& [n, t] : raw) {
    (n < "model.layers.1" ? a : b)[n] = t;
    map[n] = n < "model.layers.1" ? "s1.safetensors" : "s2.safetensors";
  }
  map["lm_head.weight"] = "s2.safetensors"; // it really is in s1
  test::write_raw_safetensors(dir_ / "s1.safetensors", a);
  test::write_raw_safetensors(dir_ / "s2.safetensors", b);
  test::write_json(dir_ / "model.safetensors.index.json", {{"weight_map", map}});
  expect_mentions(open_error(), {"lm_head.weight", "s1.safetensors", "s2.safetensors"});
}

TEST_F(CheckpointCorrupt, TensorInTwoShards) {
  RawTensors raw = fixture();
  nlohmann::json map = nlohmann::json::object();
  for (auto& [n, t] : raw) map[n] = "s1.safetensors";
  test::write_raw_safetensors(dir_ / "s1.safetensors", raw);
  test::write_raw_safetensors(dir_ / "s2.safetensors", {{"model.norm.weight", raw.at("model.norm.weight")}});
  map["model.extra"] = "s2.safetensors";
  test::write_json(dir_ / "model.safetensors.index.json", {{"weight_map", map}});
  expect_mentions(open_error(), {"model.norm.weight", "s1.safetensors", "s2.safetensors"});
}

TEST_F(CheckpointCorrupt, IndexNotJson) {
  test::write_file_bytes(dir_ / "model.safetensors.index.json", "{\"weight_map\": ");
  expect_mentions(open_error(), {"model.safetensors.index.json", "not valid JSON"});
}

} // namespace
} // namespace ninfer
