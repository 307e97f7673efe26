// A preset's --weights (ninfer-bench, ninfer-info --fit): which of its random linear weights are
// quantized, and how. The modules are those the built-in ninfer-quantize recipe quantizes (every
// decoder linear but the Gated DeltaNet in_proj_a / in_proj_b; lm_head and embeddings stay
// bfloat16), so a preset measures the layout a default `ninfer-quantize` checkpoint loads into.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "ninfer/checkpoint/checkpoint.hpp"

namespace ninfer::tools {

// "int4-g128", "int8-g64", "int4-channel", "int8-channel", "fp8" (blocks of 128 columns, as
// Qwen's FP8 releases), or "bfloat16" / "bf16" (no quantization: nullopt). Throws UsageError
// naming `flag` and the accepted forms.
std::optional<SyntheticQuant> parse_weights_spec(const std::string& spec, const char* flag = "--weights");

// The quantized tensors of a synthetic checkpoint of `config` under `q`: every tensor the
// default recipe quantizes. Throws naming the tensor when the group size does not fit it.
std::map<std::string, SyntheticQuant> quantized_tensors(const ModelConfig& config, const SyntheticQuant& q);

// The MTP head's linear weights (mtp.fc and its decoder layer's projections) under `q`: what
// ninfer-bench --mtp-weights quantizes (a default ninfer-quantize run leaves the head as it is).
std::map<std::string, SyntheticQuant> quantized_mtp_tensors(const ModelConfig& config, const SyntheticQuant& q);

// A preset's synthetic checkpoint, its weights seeded with `seed` in `dtype`. With `mtp_head` a
// Qwen3.5 shape carries Qwen3.5's one-layer MTP head (a dense Qwen3 shape has none: an error
// naming the preset). Its decoder linears as `weights` draws them and the head's as
// `mtp_weights` (parse_weights_spec's forms; the latter names --mtp-weights in its errors).
Checkpoint preset_checkpoint(const std::string& preset, DType dtype, uint64_t seed, bool mtp_head,
                             const std::string& weights, const std::string& mtp_weights);

// "int4 g128" for reports.
std::string weights_label(const SyntheticQuant& q);

} // namespace ninfer::tools
