// The model-family registry: which config.json model_types it accepts (checked against the
// transformers-written fixtures and transformers' own names), how it refuses the others, and
// that every family's presets survive its own config writer and parser.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "ninfer/checkpoint/model_family.hpp"
#include "ninfer/checkpoint/random_checkpoint.hpp"
#include "ninfer/checkpoint/shape_presets.hpp"
#include "ninfer/support/error.hpp"
#include "raw_safetensors.hpp"
#include "test_support.hpp"

namespace ninfer {
namespace {

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

// (model_type, architectures[0]) as transformers names them for the models ninfer runs.
const std::pair<const char*, const char*> kTransformersForms[] = {
    {"qwen3", "Qwen3ForCausalLM"},
    {"qwen3_5_text", "Qwen3_5ForCausalLM"},
    {"qwen3_5", "Qwen3_5ForConditionalGeneration"},
};

TEST(ModelFamilies, AcceptTheFormsTransformersWrites) {
  for (const auto& [model_type, architecture] : kTransformersForms) {
    SCOPED_TRACE(model_type);
    const FamilyForm found = model_family_for(model_type);
    EXPECT_EQ(found.form->model_type, model_type);
    EXPECT_EQ(found.form->architecture, architecture);
  }
  // The fixtures were written by transformers: each one's model_type finds a form naming the
  // architecture the fixture declares.
  for (const auto& entry : std::filesystem::directory_iterator(test::fixtures_dir())) {
    const auto cfg = entry.path() / "config.json";
    if (!std::filesystem::exists(cfg)) continue;
    SCOPED_TRACE(cfg.string());
    const auto j = test::read_json(cfg);
    const FamilyForm found = model_family_for(j["model_type"].get<std::string>());
    EXPECT_EQ(found.form->architecture, j["architectures"][0].get<std::string>());
    EXPECT_EQ(found.form->nested(), j.contains("text_config"));
  }
}

TEST(ModelFamilies, RefuseAnUnknownModelTypeNamingEveryKnownOne) {
  const std::string msg = error_of([] { model_family_for("mistral"); });
  EXPECT_NE(msg.find("'mistral'"), std::string::npos) << msg;
  for (const auto& [model_type, architecture] : kTransformersForms) {
    EXPECT_NE(msg.find(model_type), std::string::npos) << msg;
    EXPECT_NE(msg.find(architecture), std::string::npos) << msg;
  }
  for (const ModelFamily* f : model_families())
    for (const auto& form : f->forms) {
      EXPECT_NE(msg.find(form.model_type), std::string::npos) << msg;
      EXPECT_NE(msg.find(form.architecture), std::string::npos) << msg;
    }
  // A config built by hand that names no family is refused the same way.
  const std::string none = error_of([] { validate_model_config(ModelConfig{}); });
  EXPECT_NE(none.find("names no model family"), std::string::npos) << none;
  EXPECT_NE(none.find("Qwen3ForCausalLM"), std::string::npos) << none;
}

TEST(ModelFamilies, ModelTypesAndPresetNamesAreEachClaimedOnce) {
  std::set<std::string> types, presets;
  for (const ModelFamily* f : model_families()) {
    SCOPED_TRACE(f->name);
    EXPECT_FALSE(f->flat_form().nested());
    for (const auto& form : f->forms) EXPECT_TRUE(types.insert(form.model_type).second) << form.model_type;
    for (const auto* list : {&f->shape_presets, &f->random_presets})
      for (const auto& p : *list) EXPECT_TRUE(presets.insert(p.name).second) << p.name;
  }
  EXPECT_EQ(types, std::set<std::string>(supported_model_types().begin(), supported_model_types().end()));
  // The presets the tools and docs name.
  EXPECT_EQ(presets, (std::set<std::string>{"qwen3-0.6b", "qwen3-8b", "qwen3-32b", "qwen3_5-27b", "qwen3-cpu-small",
                                            "qwen3_5-cpu-small"}));
  std::set<std::string> listed;
  for (const auto& p : shape_presets()) listed.insert(p.name);
  EXPECT_EQ(listed, presets);
  std::set<std::string> random;
  for (const auto& p : random_checkpoint_presets()) random.insert(p.name);
  EXPECT_EQ(random, (std::set<std::string>{"qwen3-cpu-small", "qwen3_5-cpu-small"}));
}

// Every field config.json carries, compared one by one.
void expect_same_config(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.family, b.family);
  EXPECT_EQ(a.model_type, b.model_type);
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.weight_prefix, b.weight_prefix);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.partial_rotary_factor, b.partial_rotary_factor);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.layer_types, b.layer_types);
  EXPECT_EQ(a.linear_num_key_heads, b.linear_num_key_heads);
  EXPECT_EQ(a.linear_num_value_heads, b.linear_num_value_heads);
  EXPECT_EQ(a.linear_key_head_dim, b.linear_key_head_dim);
  EXPECT_EQ(a.linear_value_head_dim, b.linear_value_head_dim);
  EXPECT_EQ(a.linear_conv_kernel_dim, b.linear_conv_kernel_dim);
  EXPECT_EQ(a.attn_output_gate, b.attn_output_gate);
  EXPECT_EQ(a.norm_weight_offset, b.norm_weight_offset);
  EXPECT_EQ(a.rope_type, b.rope_type);
  EXPECT_EQ(a.mtp_num_hidden_layers, b.mtp_num_hidden_layers);
  EXPECT_EQ(a.has_vision, b.has_vision);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.pad_token_id, b.pad_token_id);
  EXPECT_EQ(a.random_weights, b.random_weights);
}

TEST(ModelFamilies, EveryPresetRoundTripsThroughItsFamilysParser) {
  int presets = 0;
  for (const ModelFamily* f : model_families()) {
    for (const auto* list : {&f->shape_presets, &f->random_presets}) {
      for (const auto& p : *list) {
        SCOPED_TRACE(p.name);
        ++presets;
        const ModelConfig cfg = p.config();
        EXPECT_EQ(cfg.family, f);
        EXPECT_TRUE(cfg.random_weights);
        EXPECT_NO_THROW(validate_model_config(cfg));
        EXPECT_EQ(shape_preset_config(p.name).num_layers, cfg.num_layers);

        test::TempDir dir;
        test::write_file_bytes(dir / "config.json", config_json_text(cfg, DType::BF16));
        const ModelConfig back = load_model_config(dir.path());
        expect_same_config(back, cfg);
        EXPECT_EQ(back.dtype, "bfloat16");
        // config.json holds the first eos id; generation_config.json (not written here) the rest.
        ASSERT_FALSE(cfg.eos_token_ids.empty());
        EXPECT_EQ(back.eos_token_ids, std::vector<int64_t>{cfg.eos_token_ids.front()});
        // What the family's own keys mean is read back from the text, not from the family: a
        // family with linear-attention layers must have written their sizes.
        const auto j = test::read_json(dir / "config.json");
        EXPECT_EQ(j["model_type"], f->flat_form().model_type);
        if (cfg.num_layers_of(LayerKind::LinearAttention) > 0) {
          EXPECT_EQ(j["linear_num_value_heads"].get<int64_t>(), cfg.linear_num_value_heads);
          EXPECT_EQ(j["partial_rotary_factor"].get<double>(), cfg.partial_rotary_factor);
        }
      }
    }
  }
  EXPECT_EQ(presets, 6);
}

} // namespace
} // namespace ninfer
