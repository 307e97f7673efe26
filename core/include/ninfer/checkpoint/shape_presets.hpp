// Model shapes by name, for tools that build a model from a seed instead of a checkpoint
// (ninfer-bench, later ninfer-tune): the published configurations of real Qwen models (layer
// counts, widths, heads, vocabulary) plus the small random-checkpoint presets that run on a CPU.
#pragma once

#include <string>
#include <vector>

#include "ninfer/checkpoint/model_config.hpp"
#include "ninfer/checkpoint/random_checkpoint.hpp"

namespace ninfer {

// Names and one-line descriptions, real shapes first.
const std::vector<RandomPreset>& shape_presets();

// The preset's config (random_weights set). Throws ninfer::Error listing the presets.
ModelConfig shape_preset_config(const std::string& name);

} // namespace ninfer
