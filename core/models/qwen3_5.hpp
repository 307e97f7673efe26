// Qwen3.5 (Qwen3_5ForCausalLM, and the text model of Qwen3_5ForConditionalGeneration): hybrid
// layers per config.layer_types — Gated DeltaNet ("linear_attention") and gated full attention
// (q_proj yields query and a sigmoid output gate; q/k RMSNorm (1+w); partial rotary) — with a
// SwiGLU MLP each; norms scale by (1 + w).
#pragma once

#include "decoder.hpp"
#include "ninfer/checkpoint/model_config.hpp"

namespace ninfer::models {

DecoderParts build_qwen3_5(WeightLoader& w, Backend& be, const ModelConfig& cfg, const StepLimits& limits);

} // namespace ninfer::models
