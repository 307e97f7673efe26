#include "common_parts.hpp"

#include "mlp_block.hpp"
#include "ninfer/checkpoint/expected_tensors.hpp"

namespace ninfer::models {

DecoderParts load_top_level(WeightLoader& w, const ModelConfig& cfg) {
  DecoderParts parts;
  const std::string& p = cfg.weight_prefix;
  parts.embedding = w.table(p + "embed_tokens.weight", "embed_tokens");
  parts.final_norm = w.vector(p + "norm.weight", "final norm");
  if (!cfg.tie_word_embeddings) parts.lm_head = w.matrix("lm_head.weight", "lm_head");
  parts.norm_scale = cfg.norm_weight_offset ? ops::NormScale::OnePlusW : ops::NormScale::W;
  parts.eps = static_cast<float>(cfg.rms_norm_eps);
  return parts;
}

Layer load_layer_frame(WeightLoader& w, const ModelConfig& cfg, int64_t index) {
  return load_layer_frame(w, cfg, layer_prefix(cfg, index));
}

Layer load_layer_frame(WeightLoader& w, const ModelConfig& cfg, const std::string& p) {
  Layer l;
  l.input_norm = w.vector(p + "input_layernorm.weight", p + "input_layernorm");
  l.post_norm = w.vector(p + "post_attention_layernorm.weight", p + "post_attention_layernorm");
  l.mlp = std::make_unique<MlpBlock>(w, p, cfg.intermediate_size);
  return l;
}

} // namespace ninfer::models
