// Qwen3 as config.json and the presets describe it. Defaults follow transformers' Qwen3Config.
#include <nlohmann/json.hpp>

#include "family.hpp"
#include "ninfer/checkpoint/random_checkpoint.hpp"
#include "ninfer/checkpoint/shape_presets.hpp"

namespace ninfer::models::qwen3 {
namespace {

constexpr int64_t kVocab = 151936;

void all_full_attention(const JsonFields&, ModelConfig& c) {
  c.layer_types.assign(static_cast<size_t>(c.num_layers), LayerKind::FullAttention);
}

ModelConfig published(int64_t layers, int64_t hidden, int64_t intermediate, int64_t heads, int64_t kv_heads,
                      bool tied) {
  ModelConfig c = shape_preset_base(family(), kVocab);
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

ModelConfig cpu_small() {
  ModelConfig c = random_preset_base(family());
  c.num_layers = 4;
  c.layer_types.assign(4, LayerKind::FullAttention);
  c.rope_theta = 1000000.0;
  c.partial_rotary_factor = 1.0;
  return c;
}

} // namespace

const ModelFamily& family() {
  static const ModelFamily f{
      .name = "Qwen3",
      .forms = {{.model_type = "qwen3", .architecture = "Qwen3ForCausalLM"}},
      .layer_kinds = {LayerKind::FullAttention},
      .default_partial_rotary_factor = 1.0, // the whole head is rotated
      .default_layer_types = all_full_attention,
      .read_config = nullptr,
      .write_config = nullptr,
      .shape_presets =
          {
              {"qwen3-0.6b", "Qwen3-0.6B: 28 layers, hidden 1024, 16/8 heads of 128, tied embeddings",
               [] { return published(28, 1024, 3072, 16, 8, true); }},
              {"qwen3-8b", "Qwen3-8B: 36 layers, hidden 4096, 32/8 heads of 128, MLP 12288",
               [] { return published(36, 4096, 12288, 32, 8, false); }},
              {"qwen3-32b", "Qwen3-32B: 64 layers, hidden 5120, 64/8 heads of 128, MLP 25600",
               [] { return published(64, 5120, 25600, 64, 8, false); }},
          },
      .random_presets = {{"qwen3-cpu-small", "Qwen3 dense: 4 layers, hidden 256, GQA 4/2 heads, Qwen3 vocabulary",
                          cpu_small}},
  };
  return f;
}

} // namespace ninfer::models::qwen3
