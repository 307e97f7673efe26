// Qwen3.5 as config.json and the presets describe it. Defaults follow transformers'
// Qwen3_5TextConfig.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "family.hpp"
#include "ninfer/checkpoint/random_checkpoint.hpp"
#include "ninfer/checkpoint/shape_presets.hpp"

namespace ninfer::models::qwen3_5 {
namespace {

constexpr int64_t kVocab = 248320;

// Three Gated DeltaNet layers, then one full attention layer, repeated.
void interleave(ModelConfig& c, int64_t interval) {
  c.layer_types.clear();
  for (int64_t i = 0; i < c.num_layers; ++i)
    c.layer_types.push_back((i + 1) % interval == 0 ? LayerKind::FullAttention : LayerKind::LinearAttention);
}

// Qwen3_5TextConfig: every full_attention_interval-th layer (1-based) is full attention.
void default_layer_types(const JsonFields& text, ModelConfig& c) {
  const int64_t interval = text.opt_integer("full_attention_interval").value_or(4);
  if (interval < 1) text.fail("full_attention_interval", fmt::format("must be >= 1, got {}", interval));
  interleave(c, interval);
}

void read_config(const JsonFields& text, ModelConfig& c) {
  c.linear_num_key_heads = text.opt_integer("linear_num_key_heads").value_or(16);
  c.linear_num_value_heads = text.opt_integer("linear_num_value_heads").value_or(32);
  c.linear_key_head_dim = text.opt_integer("linear_key_head_dim").value_or(128);
  c.linear_value_head_dim = text.opt_integer("linear_value_head_dim").value_or(128);
  c.linear_conv_kernel_dim = text.opt_integer("linear_conv_kernel_dim").value_or(4);
  // transformers' Qwen3.5 attention always has the output gate and (1+w) norms.
  c.attn_output_gate = true;
  c.norm_weight_offset = true;
}

void write_config(const ModelConfig& c, nlohmann::ordered_json& j) {
  j["rope_parameters"]["partial_rotary_factor"] = c.partial_rotary_factor;
  j["partial_rotary_factor"] = c.partial_rotary_factor;
  j["linear_num_key_heads"] = c.linear_num_key_heads;
  j["linear_num_value_heads"] = c.linear_num_value_heads;
  j["linear_key_head_dim"] = c.linear_key_head_dim;
  j["linear_value_head_dim"] = c.linear_value_head_dim;
  j["linear_conv_kernel_dim"] = c.linear_conv_kernel_dim;
}

// Qwen3.5-27B: 64 layers, three Gated DeltaNet layers then one gated full-attention layer.
ModelConfig qwen3_5_27b() {
  ModelConfig c = shape_preset_base(family(), kVocab);
  c.num_layers = 64;
  interleave(c, 4);
  c.hidden_size = 5120;
  c.intermediate_size = 17408;
  c.num_attention_heads = 24;
  c.num_key_value_heads = 4;
  c.head_dim = 256;
  c.rope_theta = 10000000.0;
  c.partial_rotary_factor = 0.25;
  c.max_position_embeddings = 262144;
  c.linear_num_key_heads = 16;
  c.linear_num_value_heads = 48;
  c.linear_key_head_dim = 128;
  c.linear_value_head_dim = 128;
  c.linear_conv_kernel_dim = 4;
  c.attn_output_gate = true;
  c.norm_weight_offset = true;
  return c;
}

ModelConfig cpu_small() {
  ModelConfig c = random_preset_base(family());
  c.num_layers = 8;
  interleave(c, 4);
  c.rope_theta = 10000000.0;
  c.partial_rotary_factor = 0.25;
  c.linear_num_key_heads = 2;
  c.linear_num_value_heads = 4;
  c.linear_key_head_dim = 64;
  c.linear_value_head_dim = 64;
  c.linear_conv_kernel_dim = 4;
  c.attn_output_gate = true;
  c.norm_weight_offset = true;
  return c;
}

} // namespace

const ModelFamily& family() {
  static const ModelFamily f{
      .name = "Qwen3.5",
      .forms =
          {
              {.model_type = "qwen3_5_text", .architecture = "Qwen3_5ForCausalLM"},
              {.model_type = "qwen3_5",
               .architecture = "Qwen3_5ForConditionalGeneration",
               .text_model_type = "qwen3_5_text"},
          },
      .layer_kinds = {LayerKind::FullAttention, LayerKind::LinearAttention},
      .default_partial_rotary_factor = 0.25,
      .default_layer_types = default_layer_types,
      .read_config = read_config,
      .write_config = write_config,
      .shape_presets = {{"qwen3_5-27b",
                         "Qwen3.5-27B: 64 layers (48 Gated DeltaNet, 16 gated attention), hidden 5120, vocab 248320",
                         qwen3_5_27b}},
      .random_presets = {{"qwen3_5-cpu-small",
                          "Qwen3.5 hybrid: 8 layers (3 Gated DeltaNet : 1 gated full attention), hidden 256, Qwen3 "
                          "vocabulary",
                          cpu_small}},
  };
  return f;
}

} // namespace ninfer::models::qwen3_5
