#include "qwen3.hpp"

#include "attention_block.hpp"
#include "common_parts.hpp"
#include "ninfer/checkpoint/expected_tensors.hpp"

namespace ninfer::models {

AttentionSpec attention_spec(const ModelConfig& cfg) {
  AttentionSpec a;
  a.heads = static_cast<int32_t>(cfg.num_attention_heads);
  a.kv_heads = static_cast<int32_t>(cfg.num_key_value_heads);
  a.head_dim = static_cast<int32_t>(cfg.head_dim);
  a.rotary_dim = static_cast<int32_t>(cfg.rotary_dim());
  a.rope_theta = cfg.rope_theta;
  a.eps = static_cast<float>(cfg.rms_norm_eps);
  a.output_gate = cfg.attn_output_gate;
  a.qk_norm = cfg.norm_weight_offset ? ops::NormScale::OnePlusW : ops::NormScale::W;
  return a;
}

DecoderParts build_qwen3(WeightLoader& w, Backend& be, const ModelConfig& cfg, const StepLimits& limits) {
  DecoderParts parts = load_top_level(w, cfg);
  const AttentionSpec spec = attention_spec(cfg);
  for (int64_t i = 0; i < cfg.num_layers; ++i) {
    Layer l = load_layer_frame(w, cfg, i);
    l.mixer = std::make_unique<AttentionBlock>(w, be, layer_prefix(cfg, i), spec, limits);
    parts.layers.push_back(std::move(l));
  }
  return parts;
}

} // namespace ninfer::models
