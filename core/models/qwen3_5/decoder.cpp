// The Qwen3.5 decoder: a Gated DeltaNet or attention block per layer (layer_types), each with an MLP.
#include "family.hpp"

#include "../attention_block.hpp"
#include "../common_parts.hpp"
#include "../gated_deltanet_block.hpp"
#include "ninfer/checkpoint/expected_tensors.hpp"

namespace ninfer::models::qwen3_5 {

DecoderParts build_decoder(WeightLoader& w, Backend& be, const ModelConfig& cfg, const StepLimits& limits) {
  DecoderParts parts = load_top_level(w, cfg);
  const AttentionSpec attn = attention_spec(cfg);
  GatedDeltaNetSpec gdn;
  gdn.k_heads = static_cast<int32_t>(cfg.linear_num_key_heads);
  gdn.v_heads = static_cast<int32_t>(cfg.linear_num_value_heads);
  gdn.k_dim = static_cast<int32_t>(cfg.linear_key_head_dim);
  gdn.v_dim = static_cast<int32_t>(cfg.linear_value_head_dim);
  gdn.conv_kernel = static_cast<int32_t>(cfg.linear_conv_kernel_dim);
  gdn.eps = static_cast<float>(cfg.rms_norm_eps);
  for (int64_t i = 0; i < cfg.num_layers; ++i) {
    Layer l = load_layer_frame(w, cfg, i);
    const std::string p = layer_prefix(cfg, i);
    if (cfg.layer_types[static_cast<size_t>(i)] == LayerKind::LinearAttention)
      l.mixer = std::make_unique<GatedDeltaNetBlock>(w, be, p, gdn, limits);
    else
      l.mixer = std::make_unique<AttentionBlock>(w, be, p, attn, limits);
    parts.layers.push_back(std::move(l));
  }
  return parts;
}

} // namespace ninfer::models::qwen3_5
