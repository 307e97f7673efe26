// The `quantization_config` of config.json for a plan, as the tools that write each layout do:
// compressed-tensors as llm-compressor writes it (pack-quantized, config_groups targeting
// Linear, ignore by full module name), GPTQ as GPTQModel writes it (checkpoint_format gptq,
// `dynamic` with -: exclusions and +: overrides). docs/ninfer-quantize.md shows both.
#pragma once

#include <nlohmann/json.hpp>

#include "ninfer/quantize/quantize_plan.hpp"

namespace ninfer {

nlohmann::ordered_json quantization_config(const QuantizePlan& plan);

} // namespace ninfer
