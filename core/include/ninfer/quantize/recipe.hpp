// A quantization recipe: the output format, the method (round to nearest, or GPTQ with its
// damping and column order), and per module role whether its weights are quantized and with how
// many bits, which group size and which grid (symmetric or not). Written in YAML
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
// Throw ninfer::Error listing the accepted names.
QuantFormat quant_format_from_name(const std::string& name);
QuantizeMethod quantize_method_from_name(const std::string& name);

// Group size meaning "one scale per output channel" (the whole input row is one group), as
// GPTQ's group_size -1.
inline constexpr int64_t kChannelGroup = -1;

// GPTQ's dampening: percdamp · mean(diag H) is added to H's diagonal (docs/ninfer-quantize.md).
inline constexpr double kDefaultDamp = 0.01;

struct RoleSetting {
  bool quantize = false;
  int bits = 4;
  int64_t group_size = 128; // or kChannelGroup
  bool symmetric = true;
  double damp = kDefaultDamp; // GPTQ only
};

// One `modules:` entry of a recipe: what it sets, and the line it is on (for messages).
struct RoleEntry {
  std::optional<bool> quantize;
  std::optional<int> bits;
  std::optional<int64_t> group_size;
  std::optional<bool> symmetric;
  std::optional<double> damp;
  std::string where; // "FILE:LINE"
};

struct Recipe {
  std::string origin = "the built-in default recipe"; // the file, for messages
  QuantFormat format = QuantFormat::CompressedTensors;
  QuantizeMethod method = QuantizeMethod::Rtn;
  int bits = 4;               // for every quantized role without its own
  int64_t group_size = 128;   // likewise
  bool symmetric = true;      // likewise
  // GPTQ settings: damp (default kDefaultDamp) and act order (default off). Method rtn refuses
  // them, naming gptq_where: the FILE:LINE of the first one set.
  std::optional<double> damp;
  std::optional<bool> actorder;
  std::string gptq_where;
  std::map<ModuleRole, RoleEntry> modules;

  // Act order: GPTQ quantizes the columns in order of decreasing Hessian diagonal and the output
  // carries g_idx.
  bool act_order() const { return method == QuantizeMethod::Gptq && actorder.value_or(false); }

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

// Command-line settings over a recipe: --format and --method replace its format and method,
// --bits and --group-size its defaults (a module entry with its own bits or group size keeps
// them). Throws naming the flags when the result is not a valid setting.
struct RecipeOverrides {
  std::optional<QuantFormat> format;
  std::optional<int> bits;
  std::optional<int64_t> group_size;
  std::optional<QuantizeMethod> method;
};
void apply_overrides(Recipe& recipe, const RecipeOverrides& o);

// Checks what a schema cannot (a recipe built in code has no schema): bits 4 or 8, a group size
// of at least 1 or kChannelGroup, damp in (0, 1], and no GPTQ-only key (damp, actorder) under
// method rtn. Whether a group size divides each tensor's input channels is checked against the
// model (plan_quantization).
void check_recipe(const Recipe& recipe);

} // namespace ninfer
