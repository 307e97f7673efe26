// config.json's `quantization_config` (at the top level, or under text_config in the nested
// multimodal form): which published quantized layout the checkpoint uses and which modules
// it quantizes, and how. The formats read are GPTQ, AWQ (gemm), compressed-tensors
// pack-quantized and FP8 block; anything else is an ninfer::Error naming the format and
// listing these (docs/quantization.md). The packed tensors themselves are read by
// ninfer/checkpoint/quantized_tensors.hpp.
#pragma once

#include "ninfer/checkpoint/json_fields.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ninfer {

enum class QuantMethod { Gptq, Awq, CompressedTensors, Fp8Block };
const char* quant_method_name(QuantMethod m); // "gptq", "awq", "compressed-tensors", "fp8"

// The formats ninfer reads, for messages.
const char* supported_quant_formats();

// How one module's weight is quantized.
struct QuantScheme {
  int32_t bits = 4;         // 4 or 8 (FP8: 8)
  int64_t group_size = 0;   // columns per group along K; 0: one group per row (per-channel)
  bool symmetric = true;    // the config's claim; the zero points present are what is read
  int64_t block_rows = 0;   // FP8 block: weight_block_size [block_rows, block_cols]
  int64_t block_cols = 0;
};

struct QuantizationConfig {
  QuantMethod method = QuantMethod::Gptq;
  std::filesystem::path file; // config.json, for messages
  std::string key;            // "quantization_config" or "text_config.quantization_config"
  QuantScheme scheme;         // the default scheme (GPTQ, AWQ, FP8)
  bool gptq_v2 = false;       // GPTQ checkpoint_format gptq_v2: qzeros hold the zero, not zero - 1
  bool gptq_lm_head = false;  // GPTQ `lm_head`: the LM head is quantized too

  // GPTQ `dynamic`: per-module overrides, in the config's order; the first whose pattern
  // matches the module's name (Python re.match: anchored at the start) applies.
  struct Override {
    std::string pattern;
    bool exclude = false; // "-:REGEX": the module is not quantized
    std::optional<int32_t> bits;
    std::optional<int64_t> group_size;
    std::optional<bool> symmetric;
  };
  std::vector<Override> dynamic;
  // AWQ / FP8 `modules_to_not_convert`: a module whose name contains one of these is plain.
  std::vector<std::string> not_converted;
  // compressed-tensors: `ignore` (a name, or "re:REGEX") and config_groups (targets: "Linear",
  // a name, or "re:REGEX"; the first group that targets a module gives its scheme).
  std::vector<std::string> ignore;
  struct Group {
    std::string name;
    std::vector<std::string> targets;
    QuantScheme scheme;
  };
  std::vector<Group> groups;

  // The scheme the config gives module `module` (a weight's name without ".weight"), or
  // nullopt when its lists leave the module unquantized.
  std::optional<QuantScheme> scheme_for(const std::string& module) const;
  // "config.json: key 'quantization_config'" for messages.
  std::string where() const;
};

// Parses `quantization_config` (the object found at `key` of `file`). Throws ninfer::Error
// naming the file and key for a format ninfer does not read or a malformed field.
QuantizationConfig parse_quantization_config(const ConfigJson& q, const std::filesystem::path& file,
                                             const std::string& key);

} // namespace ninfer
