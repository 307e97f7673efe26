// A Hugging Face checkpoint's config.json, normalised: flat (Qwen3ForCausalLM,
// Qwen3_5ForCausalLM) and nested multimodal (Qwen3_5ForConditionalGeneration: text_config /
// vision_config) forms, rope_theta at top level or in rope_parameters, partial rotary factor,
// per-layer types, tied embeddings. docs/checkpoints.md lists every key, its default and why.
// Which model_types are accepted, and each family's own keys, come from the registered model
// families (ninfer/checkpoint/model_family.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ninfer/checkpoint/quantization_config.hpp"

namespace ninfer {

struct ModelFamily;
enum class LayerKind { FullAttention, LinearAttention };

const char* family_name(const ModelFamily* f); // "Qwen3", "Qwen3.5"; "?" for none
const char* layer_kind_name(LayerKind k); // "full_attention", "linear_attention"

struct ModelConfig {
  const ModelFamily* family = nullptr; // a registered family (ninfer/checkpoint/model_family.hpp)
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

  // --- Additions beyond the first draft of this header -------------------------------
  // Qwen3.5 full-attention layers carry a sigmoid output gate: q_proj has 2x the rows,
  // per head [query (head_dim rows), gate (head_dim rows)] (docs/checkpoints.md).
  bool attn_output_gate = false;
  // Qwen3.5 RMSNorms scale by (1 + w) (weights stored around 0); Qwen3 by w (around 1).
  // The gated norm inside a GDN layer (linear_attn.norm) scales by w in both.
  bool norm_weight_offset = false;
  std::string rope_type = "default";   // only "default" is supported (mrope is text-equivalent)
  std::string dtype;                   // config "dtype"/"torch_dtype" ("bfloat16", ...), may be empty
  int64_t mtp_num_hidden_layers = 0;   // multi-token-prediction layers shipped (mtp.*): speculation
  bool has_vision = false;             // nested form with a vision_config (model.visual.*)
  std::optional<int64_t> pad_token_id;
  // quantization_config (top level, else text_config's): the published quantized layout of the
  // checkpoint's projections (docs/quantization.md); none for a float checkpoint.
  std::optional<QuantizationConfig> quantization;
  // Set by ninfer-make-checkpoint ("ninfer_random_weights": true): tools say so plainly.
  bool random_weights = false;
  std::filesystem::path config_path;   // the config.json this came from (for messages)

  int64_t rotary_dim() const { return static_cast<int64_t>(head_dim * partial_rotary_factor); }
  int64_t linear_key_dim() const { return linear_num_key_heads * linear_key_head_dim; }
  int64_t linear_value_dim() const { return linear_num_value_heads * linear_value_head_dim; }
  // Channels of the GDN causal conv1d: q, k and v side by side.
  int64_t linear_conv_dim() const { return 2 * linear_key_dim() + linear_value_dim(); }
  int64_t num_layers_of(LayerKind k) const;
};

// The model_type values load_model_config accepts (every registered family's forms).
const std::vector<std::string>& supported_model_types();

// Reads DIR/config.json (and generation_config.json when present). Throws ninfer::Error
// naming the file and key for a missing or malformed field or an unsupported model_type.
ModelConfig load_model_config(const std::filesystem::path& checkpoint_dir);

// Checks the invariants every model relies on (positive sizes, heads divisible by KV heads,
// layer_types matching the family, an even rotary dimension, ...). load_model_config calls it;
// tools that build a config by hand call it too. Throws ninfer::Error naming the key.
void validate_model_config(const ModelConfig& cfg);

} // namespace ninfer
