// A Hugging Face checkpoint's config.json, normalised: flat (Qwen3ForCausalLM,
// Qwen3_5ForCausalLM) and nested multimodal (Qwen3_5ForConditionalGeneration: text_config /
// vision_config) forms, rope_theta at top level or in rope_parameters, partial rotary factor,
// per-layer types, tied embeddings.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ninfer {

enum class ModelFamily { Qwen3, Qwen3_5 };
enum class LayerKind { FullAttention, LinearAttention };

struct ModelConfig {
  ModelFamily family = ModelFamily::Qwen3;
  std::string model_type;   // text model_type: "qwen3", "qwen3_5_text"
  std::string architecture; // architectures[0]
  std::string weight_prefix; // "model." or "model.language_model."

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  double partial_rotary_factor = 1.0; // fraction of head_dim that is rotated
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  std::vector<LayerKind> layer_types; // size num_layers

  // Gated DeltaNet (linear attention) layers; zero for dense Qwen3.
  int64_t linear_num_key_heads = 0;
  int64_t linear_num_value_heads = 0;
  int64_t linear_key_head_dim = 0;
  int64_t linear_value_head_dim = 0;
  int64_t linear_conv_kernel_dim = 0;

  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids; // from config.json and generation_config.json

  int64_t rotary_dim() const { return static_cast<int64_t>(head_dim * partial_rotary_factor); }
};

// Reads DIR/config.json (and generation_config.json when present). Throws ninfer::Error
// naming the file and key for a missing or malformed field or an unsupported model_type.
ModelConfig load_model_config(const std::filesystem::path& checkpoint_dir);

} // namespace ninfer
