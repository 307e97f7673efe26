// Qwen3 (Qwen3ForCausalLM): every layer is full attention with q/k RMSNorm (w), full rotary
// embedding, no output gate; SwiGLU MLP; norms scale by w.
#pragma once

#include "attention_block.hpp"
#include "decoder.hpp"
#include "ninfer/checkpoint/model_config.hpp"

namespace ninfer::models {

DecoderParts build_qwen3(WeightLoader& w, Backend& be, const ModelConfig& cfg, const StepLimits& limits);

// The attention layer of either family, as its config describes it.
AttentionSpec attention_spec(const ModelConfig& cfg);

} // namespace ninfer::models
