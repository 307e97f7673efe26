// Checkpoint::open on the transformers fixtures: every tensor as the file says (read here
// independently), the expected-tensor list equal to what transformers wrote, sharded
// checkpoints read identically, auxiliary tensors listed but never required.
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/checkpoint/expected_tensors.hpp"
#include "ninfer/support/error.hpp"
#include "raw_safetensors.hpp"
#include "test_support.hpp"

namespace ninfer {
namespace {

using test::RawTensors;
using test::TempDir;

const char* kFixtures[] = {"tiny-qwen3", "tiny-qwen3_5", "tiny-qwen3_5-long", "tiny-qwen3_5-vl-layout"};

void expect_same_as_raw(const Checkpoint& ck, const RawTensors& raw) {
  std::vector<std::string> raw_names;
  for (const auto& [n, _] : raw) raw_names.push_back(n);
  EXPECT_EQ(ck.names(), raw_names);
  for (const auto& [name, r] : raw) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(ck.has(name));
    const TensorView& t = ck.tensor(name);
    EXPECT_EQ(t.name, name);
    EXPECT_EQ(dtype_name(t.dtype), r.dtype);
    EXPECT_EQ(t.shape, r.shape);
    ASSERT_EQ(t.bytes, r.bytes.size());
    EXPECT_EQ(std::memcmp(t.data, r.bytes.data(), t.bytes), 0);
  }
}

TEST(CheckpointFixtures, TensorsMatchTheFile) {
  for (const char* name : kFixtures) {
    SCOPED_TRACE(name);
    const auto dir = test::fixtures_dir() / name;
    const Checkpoint ck = Checkpoint::open(dir);
    const RawTensors raw = test::read_raw_safetensors(dir / "model.safetensors");
    expect_same_as_raw(ck, raw);
    ASSERT_EQ(ck.files().size(), 1u);
    EXPECT_EQ(ck.files()[0], dir / "model.safetensors");
  }
}

TEST(CheckpointFixtures, F32ConversionIsTheStoredFloats) {
  const auto dir = test::fixtures_dir() / "tiny-qwen3";
  const Checkpoint ck = Checkpoint::open(dir);
  const RawTensors raw = test::read_raw_safetensors(dir / "model.safetensors");
  const auto& r = raw.at("model.layers.0.self_attn.q_proj.weight");
  std::vector<float> want(r.bytes.size() / 4);
  std::memcpy(want.data(), r.bytes.data(), r.bytes.size());
  EXPECT_EQ(to_f32(ck.tensor("model.layers.0.self_attn.q_proj.weight")), want);
}

// The list the model loaders require equals, name for name and shape for shape, what
// transformers saved (auxiliary vision tensors aside).
TEST(CheckpointFixtures, ExpectedTensorsAreExactlyWhatTransformersWrote) {
  for (const char* name : kFixtures) {
    SCOPED_TRACE(name);
    const auto dir = test::fixtures_dir() / name;
    const RawTensors raw = test::read_raw_safetensors(dir / "model.safetensors");
    const Checkpoint ck = Checkpoint::open(dir);
    std::map<std::string, std::vector<int64_t>> want, got;
    for (const auto& [n, r] : raw)
      if (n.rfind("model.visual.", 0) != 0) want[n] = r.shape;
    for (const auto& e : expected_tensors(ck.config())) {
      EXPECT_TRUE(got.emplace(e.name, e.shape).second) << "listed twice: " << e.name;
    }
    EXPECT_EQ(got, want);
    EXPECT_NO_THROW(require_all(ck));
    EXPECT_TRUE(unrecognised_tensors(ck).empty());
  }
}

TEST(CheckpointFixtures, ExpectedRolesFollowTheNormConvention) {
  const Checkpoint q3 = Checkpoint::open(test::fixtures_dir() / "tiny-qwen3");
  const Checkpoint q35 = Checkpoint::open(test::fixtures_dir() / "tiny-qwen3_5");
  for (const auto& e : expected_tensors(q3.config())) {
    if (e.name.find("norm") != std::string::npos) {
      EXPECT_EQ(e.role, TensorRole::RmsNormWeight) << e.name;
    }
  }
  for (const auto& e : expected_tensors(q35.config())) {
    if (e.name.find("linear_attn.norm") != std::string::npos) {
      EXPECT_EQ(e.role, TensorRole::RmsNormWeight) << e.name;
    } else if (e.name.find("norm") != std::string::npos) {
      EXPECT_EQ(e.role, TensorRole::RmsNormOffsetWeight) << e.name;
    }
  }
}

TEST(CheckpointFixtures, VisionTensorsAreListedAsAuxiliary) {
  const Checkpoint ck = Checkpoint::open(test::fixtures_dir() / "tiny-qwen3_5-vl-layout");
  EXPECT_EQ(ck.config().weight_prefix, "model.language_model.");
  size_t visual = 0;
  for (const auto& n : ck.names()) {
    const bool is_visual = n.rfind("model.visual.", 0) == 0;
    EXPECT_EQ(Checkpoint::is_auxiliary(n), is_visual) << n;
    visual += is_visual;
  }
  EXPECT_GT(visual, 0u);
  EXPECT_TRUE(Checkpoint::is_auxiliary("mtp.layers.0.mlp.up_proj.weight"));
  EXPECT_FALSE(Checkpoint::is_auxiliary("model.language_model.norm.weight"));
}

// Split a fixture over two shards (tensors interleaved, data order shuffled) plus an index.
TEST(CheckpointFixtures, ShardedReadsIdentically) {
  for (const char* name : {"tiny-qwen3_5", "tiny-qwen3_5-vl-layout"}) {
    SCOPED_TRACE(name);
    const auto src = test::fixtures_dir() / name;
    const RawTensors raw = test::read_raw_safetensors(src / "model.safetensors");
    TempDir dir;
    test::copy_fixture_config(name, dir.path());
    RawTensors a, b;
    nlohmann::json weight_map = nlohmann::json::object();
    size_t i = 0;
    for (const auto& [n, t] : raw) {
      const bool first = (i++ % 2) == 0;
      (first ? a : b)[n] = t;
      weight_map[n] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    }
    std::vector<std::string> b_order;
    for (const auto& [n, _] : b) b_order.insert(b_order.begin(), n); // reversed data order
    test::write_raw_safetensors(dir / "model-00001-of-00002.safetensors", a);
    test::write_raw_safetensors(dir / "model-00002-of-00002.safetensors", b, b_order);
    test::write_json(dir / "model.safetensors.index.json",
                     {{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}});

    const Checkpoint ck = Checkpoint::open(dir.path());
    EXPECT_EQ(ck.files().size(), 2u);
    expect_same_as_raw(ck, raw);
    EXPECT_NO_THROW(require_all(ck));
  }
}

// A flat config whose weights sit under model.language_model.* still loads (the tensors win).
TEST(CheckpointFixtures, WeightPrefixFollowsTheTensors) {
  TempDir dir;
  test::copy_fixture_config("tiny-qwen3_5", dir.path());
  std::filesystem::copy_file(test::fixtures_dir() / "tiny-qwen3_5-vl-layout" / "model.safetensors",
                             dir / "model.safetensors");
  const Checkpoint ck = Checkpoint::open(dir.path());
  EXPECT_EQ(ck.config().weight_prefix, "model.language_model.");
  EXPECT_NO_THROW(require_all(ck));
}

// MTP tensors are listed but never required; one in a dtype ninfer cannot read does not
// stop loading, and asking for it names the dtype.
TEST(CheckpointFixtures, MtpTensorsAreListedNotRequired) {
  TempDir dir;
  test::copy_fixture_config("tiny-qwen3_5", dir.path());
  RawTensors raw = test::read_raw_safetensors(test::fixtures_dir() / "tiny-qwen3_5" / "model.safetensors");
  raw["mtp.fc.weight"] = {"F32", {2, 2}, std::string(16, '\0')};
  raw["mtp.scale"] = {"I8", {4}, std::string(4, '\1')};
  test::write_raw_safetensors(dir / "model.safetensors", raw);
  const Checkpoint ck = Checkpoint::open(dir.path());
  const auto names = ck.names();
  EXPECT_NE(std::find(names.begin(), names.end(), "mtp.fc.weight"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "mtp.scale"), names.end());
  EXPECT_NO_THROW(require_all(ck));
  EXPECT_TRUE(unrecognised_tensors(ck).empty());
  try {
    ck.tensor("mtp.scale");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("I8"), std::string::npos) << e.what();
  }
}

TEST(CheckpointFixtures, UnrecognisedTensorsAreReported) {
  TempDir dir;
  test::copy_fixture_config("tiny-qwen3", dir.path());
  RawTensors raw = test::read_raw_safetensors(test::fixtures_dir() / "tiny-qwen3" / "model.safetensors");
  raw["model.layers.0.self_attn.q_proj.bias"] = {"F32", {64}, std::string(256, '\0')};
  test::write_raw_safetensors(dir / "model.safetensors", raw);
  const Checkpoint ck = Checkpoint::open(dir.path());
  EXPECT_EQ(unrecognised_tensors(ck), std::vector<std::string>{"model.layers.0.self_attn.q_proj.bias"});
}

} // namespace
} // namespace ninfer
