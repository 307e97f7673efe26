// A quantization recipe: the output format, the method, and per module role whether its
// weights are quantized and with how many bits and which group size. Written in YAML
// (schemas/quantize_recipe.schema.json, docs/ninfer-quantize.md); the built-in default keeps
// lm_head and the Gated DeltaNet in_proj_a / in_proj_b unquantized and quantizes every other
// linear of the decoder layers to int4 with groups of 128.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "ninfer/quantize/module_roles.hpp"

namespace ninfer {

enum class QuantFormat { CompressedTensors, Gptq };
enum class QuantizeMethod { Rtn, Gptq };

const char* quant_format_name(QuantFormat f); // "compressed-tensors", "gptq"
const char* quant_method_name(QuantizeMethod m); // "rtn", "gptq"
// Throws ninfer::Error listing the accepted names.
QuantFormat quant_format_from_name(const std::string& name);

// Group size meaning "one scale per output channel" (the whole input row is one group), as
// GPTQ's group_size -1.
inline constexpr int64_t kChannelGroup = -1;

struct RoleSetting {
  bool quantize = false;
  int bits = 4;
  int64_t group_size = 128; // or kChannelGroup
};

// One `modules:` entry of a recipe: what it sets, and the line it is on (for messages).
struct RoleEntry {
  std::optional<bool> quantize;
  std::optional<int> bits;
  std::optional<int64_t> group_size;
  std::string where; // "FILE:LINE"
};

struct Recipe {
  std::string origin = "the built-in default recipe"; // the file, for messages
  QuantFormat format = QuantFormat::CompressedTensors;
  QuantizeMethod method = QuantizeMethod::Rtn;
  int bits = 4;               // for every quantized role without its own
  int64_t group_size = 128;   // likewise
  std::map<ModuleRole, RoleEntry> modules;

  // Whether `role` is quantized when the recipe does not name it.
  static bool quantized_by_default(ModuleRole role);
  // The role's resolved setting: its entry over the recipe's defaults.
  RoleSetting setting(ModuleRole role) const;
};

Recipe default_recipe();
// Reads and validates FILE against `schema_file` (quantize_recipe.schema.json). Throws
// ninfer::Error naming FILE:LINE and the key.
Recipe load_recipe(const std::filesystem::path& file, const std::filesystem::path& schema_file);
Recipe parse_recipe(const std::string& yaml_text, const std::string& origin,
                    const std::filesystem::path& schema_file);

// Command-line settings over a recipe: --format replaces its format, --bits and --group-size its
// defaults (a module entry with its own bits or group size keeps them). Throws naming the
// flags when the result is not a valid setting.
struct RecipeOverrides {
  std::optional<QuantFormat> format;
  std::optional<int> bits;
  std::optional<int64_t> group_size;
};
void apply_overrides(Recipe& recipe, const RecipeOverrides& o);

// Checks what a schema cannot (a recipe built in code has no schema): bits 4 or 8, a group size
// of at least 1 or kChannelGroup, and a method that exists today. Whether a group size divides
// each tensor's input channels is checked against the model (plan_quantization).
void check_recipe(const Recipe& recipe);

} // namespace ninfer
