// Quantization recipes: the built-in default, the examples in models/, the schema's and the
// program's refusals (each naming the file, line and key), and module roles of tensor names.
#include <gtest/gtest.h>

#include "ninfer/quantize/module_roles.hpp"
#include "ninfer/quantize/recipe.hpp"
#include "ninfer/support/error.hpp"
#include "test_support.hpp"

namespace ninfer {
namespace {

std::filesystem::path schema() { return test::source_dir() / "schemas" / "quantize_recipe.schema.json"; }

std::string error_of(const std::string& yaml) {
  try {
    Recipe r = parse_recipe(yaml, "r.yaml", schema());
    check_recipe(r);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(QuantizeRecipe, DefaultKeepsLmHeadAndGdnGatesUnquantized) {
  const Recipe r = default_recipe();
  EXPECT_EQ(r.format, QuantFormat::CompressedTensors);
  EXPECT_EQ(r.method, QuantizeMethod::Rtn);
  for (ModuleRole role : all_module_roles()) {
    const bool kept = role == ModuleRole::LmHead || role == ModuleRole::GdnA || role == ModuleRole::GdnB ||
                      role == ModuleRole::Mtp;
    EXPECT_EQ(r.setting(role).quantize, !kept) << module_role_name(role);
    EXPECT_EQ(r.setting(role).bits, 4);
    EXPECT_EQ(r.setting(role).group_size, 128);
  }
}

TEST(QuantizeRecipe, ExamplesLoadAndResolve) {
  const auto dir = test::source_dir() / "models" / "recipes";
  const Recipe a = load_recipe(dir / "int4-g128.yaml", schema());
  EXPECT_EQ(a.setting(ModuleRole::MlpDown).bits, 4);
  EXPECT_FALSE(a.setting(ModuleRole::LmHead).quantize);
  const Recipe b = load_recipe(dir / "qwen3_5-int4-mixed.yaml", schema());
  EXPECT_EQ(b.format, QuantFormat::Gptq);
  EXPECT_EQ(b.setting(ModuleRole::GdnQkv).bits, 8);
  EXPECT_EQ(b.setting(ModuleRole::AttnQ).bits, 4);
  EXPECT_FALSE(b.setting(ModuleRole::GdnA).quantize);
  const Recipe c = load_recipe(dir / "int4-g128-mtp.yaml", schema());
  EXPECT_TRUE(c.setting(ModuleRole::Mtp).quantize);
  EXPECT_EQ(c.setting(ModuleRole::Mtp).bits, 4);
  EXPECT_FALSE(a.setting(ModuleRole::Mtp).quantize);
  check_recipe(a);
  check_recipe(b);
  check_recipe(c);
}

// models/recipes/ holds ninfer-quantize recipes: each must load.
TEST(QuantizeRecipe, EveryRecipeInModelsLoads) {
  int count = 0;
  for (const auto& e : std::filesystem::directory_iterator(test::source_dir() / "models" / "recipes")) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".yaml") continue;
    SCOPED_TRACE(name);
    check_recipe(load_recipe(e.path(), schema()));
    ++count;
  }
  EXPECT_GE(count, 2);
}

TEST(QuantizeRecipe, CommandLineOverridesDefaultsNotModuleEntries) {
  Recipe r = parse_recipe("bits: 4\nmodules:\n  mlp.down_proj: {bits: 8}\n  lm_head: {}\n", "r.yaml", schema());
  apply_overrides(r, {QuantFormat::Gptq, 8, 64});
  EXPECT_EQ(r.format, QuantFormat::Gptq);
  EXPECT_EQ(r.setting(ModuleRole::AttnQ).bits, 8);
  EXPECT_EQ(r.setting(ModuleRole::AttnQ).group_size, 64);
  EXPECT_EQ(r.setting(ModuleRole::MlpDown).bits, 8);
  EXPECT_TRUE(r.setting(ModuleRole::LmHead).quantize); // named without quantize: false
  try {
    apply_overrides(r, {std::nullopt, 3, std::nullopt});
    FAIL() << "--bits 3 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--bits"), std::string::npos) << e.what();
  }
}

TEST(QuantizeRecipe, GptqSettingsResolvePerRole) {
  Recipe r = parse_recipe("method: gptq\ndamp: 0.02\nactorder: true\nsymmetric: false\nmodules:\n"
                          "  mlp.down_proj: {damp: 0.1, symmetric: true}\n",
                          "r.yaml", schema());
  check_recipe(r);
  EXPECT_EQ(r.method, QuantizeMethod::Gptq);
  EXPECT_TRUE(r.act_order());
  EXPECT_EQ(r.setting(ModuleRole::AttnQ).damp, 0.02);
  EXPECT_FALSE(r.setting(ModuleRole::AttnQ).symmetric);
  EXPECT_EQ(r.setting(ModuleRole::MlpDown).damp, 0.1);
  EXPECT_TRUE(r.setting(ModuleRole::MlpDown).symmetric);
  EXPECT_EQ(default_recipe().setting(ModuleRole::AttnQ).damp, kDefaultDamp);
  // --method over the recipe: rtn then refuses the GPTQ-only keys, naming where they are.
  apply_overrides(r, {std::nullopt, std::nullopt, std::nullopt, QuantizeMethod::Rtn});
  try {
    check_recipe(r);
    FAIL() << "damp and actorder were accepted under --method rtn";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("r.yaml:2: damp applies to method gptq"), std::string::npos) << e.what();
  }
  Recipe plain = default_recipe();
  apply_overrides(plain, {std::nullopt, std::nullopt, std::nullopt, QuantizeMethod::Gptq});
  EXPECT_EQ(plain.method, QuantizeMethod::Gptq);
  EXPECT_FALSE(plain.act_order());
  EXPECT_NE(plain.origin.find("--method gptq"), std::string::npos) << plain.origin;
}

TEST(QuantizeRecipe, RefusalsNameTheProblem) {
  const std::pair<const char*, const char*> cases[] = {
      {"format: awq\n", "r.yaml:1"},
      {"bits: 3\n", "bits"},
      {"group_size: 0\n", "group_size"},
      {"modules:\n  mlp.gate: {bits: 4}\n", "mlp.gate"},
      {"modules:\n  lm_head: {bits: 4, scale: 2}\n", "scale"},
      {"method: awq\n", "method"},
      {"actorder: true\n", "r.yaml:1: actorder applies to method gptq"},
      {"bits: 8\ndamp: 0.05\n", "r.yaml:2: damp applies to method gptq"},
      {"modules:\n  mlp.down_proj: {damp: 0.1}\n", "r.yaml:2: modules: mlp.down_proj: damp applies to method gptq"},
      {"method: gptq\ndamp: 0\n", "damp"},
      {"method: gptq\nmodules:\n  mlp.down_proj: {damp: 1.5}\n", "damp"},
      {"symmetric: maybe\n", "symmetric"},
      {"bits: 4\nbits: 8\n", "duplicate key"},
  };
  for (const auto& [yaml, want] : cases) {
    const std::string e = error_of(yaml);
    EXPECT_NE(e.find(want), std::string::npos) << yaml << " -> " << (e.empty() ? "(accepted)" : e);
  }
}

TEST(QuantizeRecipe, ModuleRolesOfTensorNames) {
  EXPECT_EQ(module_role_of("model.layers.3.self_attn.q_proj.weight", "model."), ModuleRole::AttnQ);
  EXPECT_EQ(module_role_of("model.language_model.layers.10.linear_attn.in_proj_qkv.weight", "model.language_model."),
            ModuleRole::GdnQkv);
  EXPECT_EQ(module_role_of("lm_head.weight", "model."), ModuleRole::LmHead);
  // The MTP head's linears, whatever the text model's prefix: one role.
  for (const char* head : {"mtp.fc.weight", "mtp.layers.0.mlp.down_proj.weight", "mtp.layers.0.self_attn.q_proj.weight"})
    for (const char* prefix : {"model.", "model.language_model."})
      EXPECT_EQ(module_role_of(head, prefix), ModuleRole::Mtp) << head << " under " << prefix;
  for (const char* other : {"model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
                            "model.layers.0.linear_attn.conv1d.weight", "model.layers.0.linear_attn.A_log",
                            "model.layers.0.linear_attn.dt_bias", "mtp.norm.weight", "mtp.pre_fc_norm_hidden.weight",
                            "mtp.layers.0.input_layernorm.weight", "mtp.layers.0.self_attn.q_norm.weight",
                            "mtp.fc.bias", "mtp.layers.0.mtp.weight", "model.layers.0.mtp.weight",
                            "model.visual.blocks.0.attn.qkv.weight", "model.layers.x.mlp.up_proj.weight",
                            "model.layers.0.mlp.up_proj.bias", "model.layers.0.lm_head.weight"})
    EXPECT_FALSE(module_role_of(other, "model.").has_value()) << other;
  // The multimodal layout's text weights are not "model." ones.
  EXPECT_FALSE(module_role_of("model.language_model.layers.0.mlp.up_proj.weight", "model.").has_value());
}

} // namespace
} // namespace ninfer
