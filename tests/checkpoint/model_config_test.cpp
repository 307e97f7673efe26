// load_model_config against the fixtures' config.json (read independently here) and against
// variants that exercise each documented rule and default (docs/checkpoints.md).
#include <gtest/gtest.h>

#include "ninfer/checkpoint/model_config.hpp"
#include "ninfer/support/error.hpp"
#include "raw_safetensors.hpp"
#include "test_support.hpp"

namespace ninfer {
namespace {

using nlohmann::json;
using test::TempDir;

const char* kFixtures[] = {"tiny-qwen3", "tiny-qwen3_5", "tiny-qwen3_5-long", "tiny-qwen3_5-vl-layout"};

// The message of the ninfer::Error that f throws (fails the test if none is thrown).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an ninfer::Error";
  return "";
}

TEST(CheckpointConfig, EveryFixtureParsesAsItsJsonSays) {
  for (const char* name : kFixtures) {
    SCOPED_TRACE(name);
    const auto dir = test::fixtures_dir() / name;
    const json root = test::read_json(dir / "config.json");
    const bool nested = root.contains("text_config");
    const json& t = nested ? root["text_config"] : root;
    const ModelConfig c = load_model_config(dir);

    EXPECT_EQ(c.architecture, root["architectures"][0].get<std::string>());
    EXPECT_EQ(c.model_type, t["model_type"].get<std::string>());
    const bool qwen3_5 = t["model_type"] != "qwen3";
    EXPECT_STREQ(family_name(c.family), qwen3_5 ? "Qwen3.5" : "Qwen3");
    EXPECT_EQ(c.weight_prefix, nested ? "model.language_model." : "model.");
    EXPECT_EQ(c.has_vision, root.contains("vision_config"));
    EXPECT_EQ(c.vocab_size, t["vocab_size"].get<int64_t>());
    EXPECT_EQ(c.hidden_size, t["hidden_size"].get<int64_t>());
    EXPECT_EQ(c.intermediate_size, t["intermediate_size"].get<int64_t>());
    EXPECT_EQ(c.num_layers, t["num_hidden_layers"].get<int64_t>());
    EXPECT_EQ(c.num_attention_heads, t["num_attention_heads"].get<int64_t>());
    EXPECT_EQ(c.num_key_value_heads, t["num_key_value_heads"].get<int64_t>());
    EXPECT_EQ(c.head_dim, t["head_dim"].get<int64_t>());
    EXPECT_EQ(c.rms_norm_eps, t["rms_norm_eps"].get<double>());
    EXPECT_EQ(c.rope_theta, t["rope_parameters"]["rope_theta"].get<double>());
    EXPECT_EQ(c.partial_rotary_factor, t["rope_parameters"].value("partial_rotary_factor", 1.0));
    EXPECT_EQ(c.max_position_embeddings, t["max_position_embeddings"].get<int64_t>());
    EXPECT_EQ(c.tie_word_embeddings, root["tie_word_embeddings"].get<bool>());
    ASSERT_EQ(c.layer_types.size(), t["layer_types"].size());
    for (size_t i = 0; i < c.layer_types.size(); ++i)
      EXPECT_EQ(layer_kind_name(c.layer_types[i]), t["layer_types"][i].get<std::string>()) << "layer " << i;
    if (qwen3_5) {
      EXPECT_EQ(c.linear_num_key_heads, t["linear_num_key_heads"].get<int64_t>());
      EXPECT_EQ(c.linear_num_value_heads, t["linear_num_value_heads"].get<int64_t>());
      EXPECT_EQ(c.linear_key_head_dim, t["linear_key_head_dim"].get<int64_t>());
      EXPECT_EQ(c.linear_value_head_dim, t["linear_value_head_dim"].get<int64_t>());
      EXPECT_EQ(c.linear_conv_kernel_dim, t["linear_conv_kernel_dim"].get<int64_t>());
      EXPECT_TRUE(c.attn_output_gate);
      EXPECT_TRUE(c.norm_weight_offset);
    } else {
      EXPECT_FALSE(c.attn_output_gate);
      EXPECT_FALSE(c.norm_weight_offset);
    }
    EXPECT_EQ(c.rotary_dim(), static_cast<int64_t>(c.head_dim * c.partial_rotary_factor));
    // The fixtures carry no eos/bos (null everywhere).
    EXPECT_TRUE(c.eos_token_ids.empty());
    EXPECT_FALSE(c.bos_token_id.has_value());
    EXPECT_FALSE(c.random_weights);
  }
}

// A fixture's config.json, modified by `edit`, loaded from a temp folder.
class CheckpointConfigVariant : public ::testing::Test {
 protected:
  json fixture(const char* name) { return test::read_json(test::fixtures_dir() / name / "config.json"); }
  ModelConfig load(const json& cfg, const json* gen = nullptr) {
    test::write_json(dir_ / "config.json", cfg);
    if (gen) test::write_json(dir_ / "generation_config.json", *gen);
    return load_model_config(dir_.path());
  }
  std::string load_error(const json& cfg) {
    return error_of([&] { load(cfg); });
  }
  std::string config_path() const { return (dir_.path() / "config.json").string(); }
  TempDir dir_;
};

TEST_F(CheckpointConfigVariant, RopeThetaAtTopLevel) {
  json j = fixture("tiny-qwen3");
  j.erase("rope_parameters");
  j["rope_theta"] = 1234567.0;
  EXPECT_EQ(load(j).rope_theta, 1234567.0);
}

TEST_F(CheckpointConfigVariant, RopeThetaDefaultsTo10000) {
  json j = fixture("tiny-qwen3");
  j.erase("rope_parameters");
  EXPECT_EQ(load(j).rope_theta, 10000.0);
}

TEST_F(CheckpointConfigVariant, PartialRotaryFactorAtTopLevelOrDefault) {
  json j = fixture("tiny-qwen3_5");
  j["rope_parameters"].erase("partial_rotary_factor");
  j["partial_rotary_factor"] = 0.5;
  EXPECT_EQ(load(j).partial_rotary_factor, 0.5);
  j.erase("partial_rotary_factor"); // Qwen3_5TextConfig's default
  EXPECT_EQ(load(j).partial_rotary_factor, 0.25);
  json q3 = fixture("tiny-qwen3");
  EXPECT_EQ(load(q3).partial_rotary_factor, 1.0);
}

TEST_F(CheckpointConfigVariant, Qwen35LayerTypesDefaultToEveryFourthFull) {
  json j = fixture("tiny-qwen3_5");
  j.erase("layer_types");
  j["num_hidden_layers"] = 9;
  const ModelConfig c = load(j);
  ASSERT_EQ(c.layer_types.size(), 9u);
  for (int i = 0; i < 9; ++i) // transformers: layer i is full iff (i + 1) % 4 == 0
    EXPECT_EQ(c.layer_types[i], (i == 3 || i == 7) ? LayerKind::FullAttention : LayerKind::LinearAttention) << i;

  j["full_attention_interval"] = 2;
  const ModelConfig c2 = load(j);
  for (int i = 0; i < 9; ++i)
    EXPECT_EQ(c2.layer_types[i], (i % 2 == 1) ? LayerKind::FullAttention : LayerKind::LinearAttention) << i;
}

TEST_F(CheckpointConfigVariant, Qwen3LayerTypesDefaultToAllFull) {
  json j = fixture("tiny-qwen3");
  j.erase("layer_types");
  const ModelConfig c = load(j);
  ASSERT_EQ(c.layer_types.size(), 3u);
  for (auto k : c.layer_types) EXPECT_EQ(k, LayerKind::FullAttention);
}

TEST_F(CheckpointConfigVariant, LegacyLayerTypeNames) {
  json j = fixture("tiny-qwen3_5");
  j["layer_types"] = {"mamba", "mamba", "mamba", "attention"};
  const ModelConfig c = load(j);
  EXPECT_EQ(c.layer_types[0], LayerKind::LinearAttention);
  EXPECT_EQ(c.layer_types[3], LayerKind::FullAttention);
}

TEST_F(CheckpointConfigVariant, HeadDimDefaultsToHiddenOverHeads) {
  json j = fixture("tiny-qwen3_5"); // head_dim 32 there, hidden 64 / 4 heads = 16 by default
  j.erase("head_dim");
  EXPECT_EQ(load(j).head_dim, j["hidden_size"].get<int64_t>() / j["num_attention_heads"].get<int64_t>());
}

TEST_F(CheckpointConfigVariant, EosIdsFromConfigAndGenerationConfig) {
  json j = fixture("tiny-qwen3");
  j["eos_token_id"] = 5;
  const json gen = {{"eos_token_id", {7, 5}}, {"bos_token_id", 3}};
  const ModelConfig c = load(j, &gen);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(c.bos_token_id, 3);

  const json gen_int = {{"eos_token_id", 11}};
  j.erase("eos_token_id");
  EXPECT_EQ(load(j, &gen_int).eos_token_ids, (std::vector<int64_t>{11}));
}

TEST_F(CheckpointConfigVariant, NestedEosAndTieFromEitherLevel) {
  json j = fixture("tiny-qwen3_5-vl-layout");
  j["text_config"]["eos_token_id"] = 9;
  j["tie_word_embeddings"] = true; // the outer config owns the tie
  j["text_config"]["tie_word_embeddings"] = false;
  const json gen = {{"eos_token_id", {9, 3}}};
  const ModelConfig c = load(j, &gen);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{9, 3}));
  EXPECT_TRUE(c.tie_word_embeddings);
}

TEST_F(CheckpointConfigVariant, NestedRopeThetaAtTopLevelOfTextConfig) {
  json j = fixture("tiny-qwen3_5-vl-layout");
  j["text_config"].erase("rope_parameters");
  j["text_config"]["rope_theta"] = 5e6;
  EXPECT_EQ(load(j).rope_theta, 5e6);
}

TEST_F(CheckpointConfigVariant, UnknownModelTypeListsSupportedOnes) {
  json j = fixture("tiny-qwen3");
  j["model_type"] = "llama";
  const std::string msg = load_error(j);
  EXPECT_NE(msg.find("llama"), std::string::npos) << msg;
  EXPECT_NE(msg.find(config_path()), std::string::npos) << msg;
  for (const auto& t : supported_model_types()) EXPECT_NE(msg.find(t), std::string::npos) << msg;
}

TEST_F(CheckpointConfigVariant, MissingOrMistypedKeysNameFileAndKey) {
  json j = fixture("tiny-qwen3");
  j.erase("hidden_size");
  std::string msg = load_error(j);
  EXPECT_NE(msg.find("'hidden_size'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(config_path()), std::string::npos) << msg;

  j = fixture("tiny-qwen3");
  j["num_attention_heads"] = "four";
  msg = load_error(j);
  EXPECT_NE(msg.find("'num_attention_heads'"), std::string::npos) << msg;

  json n = fixture("tiny-qwen3_5-vl-layout");
  n["text_config"].erase("vocab_size");
  msg = load_error(n);
  EXPECT_NE(msg.find("'text_config.vocab_size'"), std::string::npos) << msg;

  n = fixture("tiny-qwen3_5-vl-layout");
  n.erase("text_config");
  msg = load_error(n);
  EXPECT_NE(msg.find("'text_config'"), std::string::npos) << msg;
}

TEST_F(CheckpointConfigVariant, InconsistentConfigsAreRefused) {
  json j = fixture("tiny-qwen3_5");
  j["layer_types"] = {"linear_attention", "full_attention"};
  EXPECT_NE(load_error(j).find("layer_types"), std::string::npos);

  j = fixture("tiny-qwen3");
  j["layer_types"] = {"full_attention", "linear_attention", "full_attention"};
  EXPECT_NE(load_error(j).find("linear_attention"), std::string::npos);

  j = fixture("tiny-qwen3");
  j["num_key_value_heads"] = 3;
  EXPECT_NE(load_error(j).find("num_key_value_heads"), std::string::npos);

  j = fixture("tiny-qwen3");
  j["rope_parameters"]["rope_type"] = "yarn";
  EXPECT_NE(load_error(j).find("yarn"), std::string::npos);

  j = fixture("tiny-qwen3");
  j["attention_bias"] = true;
  EXPECT_NE(load_error(j).find("attention_bias"), std::string::npos);
}

TEST_F(CheckpointConfigVariant, MalformedJsonNamesTheFile) {
  test::write_file_bytes(dir_ / "config.json", "{\"model_type\": \"qwen3\",");
  const std::string msg = error_of([&] { load_model_config(dir_.path()); });
  EXPECT_NE(msg.find(config_path()), std::string::npos) << msg;
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
}

TEST_F(CheckpointConfigVariant, MissingConfigJson) {
  const std::string msg = error_of([&] { load_model_config(dir_.path()); });
  EXPECT_NE(msg.find(config_path()), std::string::npos) << msg;
  const std::string msg2 = error_of([&] { load_model_config(dir_ / "nope"); });
  EXPECT_NE(msg2.find("nope"), std::string::npos) << msg2;
}

} // namespace
} // namespace ninfer
