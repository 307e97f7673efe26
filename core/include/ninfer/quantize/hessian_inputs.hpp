// The inputs GPTQ needs a Hessian of, and the calibration passes that collect them. Modules
// that read the same rows share one Hessian: q, k and v (the attention's normed input); the
// Gated DeltaNet's qkv, z, a and b; gate and up; and each of o_proj, out_proj, down_proj and
// lm_head alone. One Hessian is K x K float64 (K the input features), so a 27B's down_proj
// input (K = 17408) takes 2.4 GB: a pass holds the Hessians of a run of consecutive layers only,
// as many as a memory budget allows, and the calibration text is read once per pass.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ninfer/quantize/quantize_plan.hpp"

namespace ninfer {

struct HessianInput {
  std::string name;            // "model.layers.3.mlp input" (messages, progress)
  int64_t layer = 0;           // decoder layer; lm_head's input counts as layer num_layers
  int64_t cols = 0;            // K
  std::vector<size_t> modules; // indices into QuantizePlan::quantized
  uint64_t bytes() const { return static_cast<uint64_t>(cols) * static_cast<uint64_t>(cols) * sizeof(double); }
};

// Every quantized module of the plan under the input it reads, in layer order (lm_head last).
// Throws ninfer::Error for a module outside the decoder layers other than lm_head.
std::vector<HessianInput> hessian_inputs(const QuantizePlan& plan, int64_t num_layers);

struct CalibrationPass {
  int64_t first_layer = 0, last_layer = 0; // inclusive
  std::vector<size_t> inputs;              // indices into the hessian_inputs
  uint64_t bytes = 0;                      // their Hessians
};

// Consecutive layers per pass: `layers_per_pass` of them when positive, else as many as fit in
// `memory_limit` bytes of Hessians (at least one layer per pass, however large).
std::vector<CalibrationPass> plan_passes(const std::vector<HessianInput>& inputs, uint64_t memory_limit,
                                         int64_t layers_per_pass);

} // namespace ninfer
