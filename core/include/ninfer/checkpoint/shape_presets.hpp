// Model shapes by name, for tools that build a model from a seed instead of a checkpoint
// (ninfer-bench, ninfer-tune): the published configurations of real models (layer counts,
// widths, heads, vocabulary) plus the small random-checkpoint presets that run on a CPU. Each
// model family lists its own (core/models/<family>/).
#pragma once

#include <string>
#include <vector>

#include "ninfer/checkpoint/model_config.hpp"
#include "ninfer/checkpoint/random_checkpoint.hpp"

namespace ninfer {

// Names and one-line descriptions: every registered family's published shapes, then every
// random-checkpoint preset.
const std::vector<RandomPreset>& shape_presets();

// The preset's config (random_weights set). Throws ninfer::Error listing the presets.
ModelConfig shape_preset_config(const std::string& name);

// What a published shape starts from: `family` (its flat form), `vocab` rows, bf16 random
// weights and the Qwen tokenizer's special tokens; the family's preset sets the rest.
ModelConfig shape_preset_base(const ModelFamily& family, int64_t vocab);

} // namespace ninfer
