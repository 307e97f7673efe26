// What Qwen3 and Qwen3.5 load the same way: the embedding, final norm and LM head, and each
// layer's two norms and MLP. The families differ only in their token mixers.
#pragma once

#include "decoder.hpp"
#include "ninfer/checkpoint/model_config.hpp"

namespace ninfer::models {

// Embedding, final norm, LM head (none when tied), and the norm convention.
DecoderParts load_top_level(WeightLoader& w, const ModelConfig& cfg);

// Layer `index` without its mixer: input / post-attention norms and the MLP.
Layer load_layer_frame(WeightLoader& w, const ModelConfig& cfg, int64_t index);
// The same for the layer whose tensors are named `prefix` + "input_layernorm.weight", ... (the
// MTP head's "mtp.layers.0.").
Layer load_layer_frame(WeightLoader& w, const ModelConfig& cfg, const std::string& prefix);

} // namespace ninfer::models
