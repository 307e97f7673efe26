// Qwen3.5 (Qwen3_5ForCausalLM, and the text model of Qwen3_5ForConditionalGeneration): hybrid
// layers per config.layer_types — Gated DeltaNet ("linear_attention") and gated full attention
// (q_proj yields query and a sigmoid output gate; q/k RMSNorm (1+w); partial rotary) — with a
// SwiGLU MLP each; norms scale by (1 + w).
#pragma once

#include "../decoder.hpp"
#include "ninfer/checkpoint/model_family.hpp"

namespace ninfer::models::qwen3_5 {

// config.json forms, keys and presets (registered in model_families.cpp).
const ModelFamily& family();

DecoderParts build_decoder(WeightLoader& w, Backend& be, const ModelConfig& cfg, const StepLimits& limits);

} // namespace ninfer::models::qwen3_5
