// The Qwen3 decoder: an attention block and an MLP per layer.
#include "family.hpp"

#include "../attention_block.hpp"
#include "../common_parts.hpp"
#include "ninfer/checkpoint/expected_tensors.hpp"

namespace ninfer::models::qwen3 {

DecoderParts build_decoder(WeightLoader& w, Backend& be, const ModelConfig& cfg, const StepLimits& limits) {
  DecoderParts parts = load_top_level(w, cfg);
  const AttentionSpec spec = attention_spec(cfg);
  for (int64_t i = 0; i < cfg.num_layers; ++i) {
    Layer l = load_layer_frame(w, cfg, i);
    l.mixer = std::make_unique<AttentionBlock>(w, be, layer_prefix(cfg, i), spec, limits);
    parts.layers.push_back(std::move(l));
  }
  return parts;
}

} // namespace ninfer::models::qwen3
