// Published shapes of Qwen3 and Qwen3.5 models (from their config.json files on the Hugging
// Face hub); the weights are never needed, only the sizes.
#include "ninfer/checkpoint/shape_presets.hpp"

#include <fmt/format.h>

#include "ninfer/support/error.hpp"

namespace ninfer {
namespace {

constexpr int64_t kQwen3Vocab = 151936;
constexpr int64_t kQwen3_5Vocab = 248320;

ModelConfig base(ModelFamily family, int64_t vocab) {
  ModelConfig c;
  c.family = family;
  c.weight_prefix = "model.";
  c.vocab_size = vocab;
  c.rms_norm_eps = 1e-6;
  c.bos_token_id = 151643;
  c.eos_token_ids = {151645, 151643};
  c.random_weights = true;
  c.dtype = "bfloat16";
  return c;
}

ModelConfig qwen3(int64_t layers, int64_t hidden, int64_t intermediate, int64_t heads, int64_t kv_heads, bool tied) {
  ModelConfig c = base(ModelFamily::Qwen3, kQwen3Vocab);
  c.model_type = "qwen3";
  c.architecture = "Qwen3ForCausalLM";
  c.num_layers = layers;
  c.layer_types.assign(static_cast<size_t>(layers), LayerKind::FullAttention);
  c.hidden_size = hidden;
  c.intermediate_size = intermediate;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.head_dim = 128;
  c.rope_theta = 1000000.0;
  c.max_position_embeddings = 40960;
  c.tie_word_embeddings = tied;
  return c;
}

// Qwen3.5-27B: 64 layers, three Gated DeltaNet layers then one gated full-attention layer.
ModelConfig qwen3_5_27b() {
  ModelConfig c = base(ModelFamily::Qwen3_5, kQwen3_5Vocab);
  c.model_type = "qwen3_5_text";
  c.architecture = "Qwen3_5ForCausalLM";
  c.num_layers = 64;
  for (int i = 0; i < 64; ++i)
    c.layer_types.push_back((i + 1) % 4 == 0 ? LayerKind::FullAttention : LayerKind::LinearAttention);
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

} // namespace

const std::vector<RandomPreset>& shape_presets() {
  static const std::vector<RandomPreset> presets = [] {
    std::vector<RandomPreset> p{
        {"qwen3-0.6b", "Qwen3-0.6B: 28 layers, hidden 1024, 16/8 heads of 128, tied embeddings"},
        {"qwen3-8b", "Qwen3-8B: 36 layers, hidden 4096, 32/8 heads of 128, MLP 12288"},
        {"qwen3-32b", "Qwen3-32B: 64 layers, hidden 5120, 64/8 heads of 128, MLP 25600"},
        {"qwen3_5-27b", "Qwen3.5-27B: 64 layers (48 Gated DeltaNet, 16 gated attention), hidden 5120, vocab 248320"},
    };
    for (const auto& r : random_checkpoint_presets()) p.push_back(r);
    return p;
  }();
  return presets;
}

ModelConfig shape_preset_config(const std::string& name) {
  if (name == "qwen3-0.6b") return qwen3(28, 1024, 3072, 16, 8, true);
  if (name == "qwen3-8b") return qwen3(36, 4096, 12288, 32, 8, false);
  if (name == "qwen3-32b") return qwen3(64, 5120, 25600, 64, 8, false);
  if (name == "qwen3_5-27b") return qwen3_5_27b();
  for (const auto& r : random_checkpoint_presets())
    if (r.name == name) return random_checkpoint_config(name);
  std::string names;
  for (const auto& p : shape_presets()) names += (names.empty() ? "" : ", ") + p.name;
  throw Error(fmt::format("unknown shape preset '{}'; presets: {}", name, names));
}

} // namespace ninfer
