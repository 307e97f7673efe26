// The tensors one quantized module becomes in each layout: their names, dtypes and shapes
// (known from the plan, before any weight is quantized, so shards can be planned first) and
// their bytes (from the quantized weights).
#pragma once

#include <string>
#include <vector>

#include "ninfer/quantize/output_folder.hpp"
#include "ninfer/quantize/quantize_plan.hpp"
#include "ninfer/quantize/quantized_weights.hpp"

namespace ninfer::quantize_detail {

// compressed-tensors: weight_packed, weight_scale, weight_shape, then weight_zero_point when
// asymmetric and weight_g_idx in act order. GPTQ: qweight, qzeros, scales, g_idx. Every tensor
// gets `unit`.
std::vector<OutputTensor> module_tensors(const PlannedModule& m, const QuantizePlan& plan, size_t unit);

// Their bytes, in the same order (little-endian, as safetensors stores them).
std::vector<std::string> module_tensor_bytes(const QuantizedWeights& q, const PlannedModule& m,
                                             const QuantizePlan& plan);

} // namespace ninfer::quantize_detail
