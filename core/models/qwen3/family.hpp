// Qwen3 (Qwen3ForCausalLM): every layer is full attention with q/k RMSNorm (w), full rotary
// embedding, no output gate; SwiGLU MLP; norms scale by w.
#pragma once

#include "../decoder.hpp"
#include "ninfer/checkpoint/model_family.hpp"

namespace ninfer::models::qwen3 {

// config.json forms, keys and presets (registered in model_families.cpp).
const ModelFamily& family();

DecoderParts build_decoder(WeightLoader& w, Backend& be, const ModelConfig& cfg, const StepLimits& limits);

} // namespace ninfer::models::qwen3
