#include "ninfer/quantize/recipe.hpp"

#include <fmt/format.h>

#include "ninfer/support/error.hpp"
#include "ninfer/support/yaml_schema.hpp"

namespace ninfer {

const char* quant_format_name(QuantFormat f) {
  return f == QuantFormat::Gptq ? "gptq" : "compressed-tensors";
}

const char* quant_method_name(QuantizeMethod m) { return m == QuantizeMethod::Gptq ? "gptq" : "rtn"; }

QuantizeMethod quantize_method_from_name(const std::string& name) {
  if (name == "rtn") return QuantizeMethod::Rtn;
  if (name == "gptq") return QuantizeMethod::Gptq;
  throw Error(fmt::format("method '{}' is not one ninfer-quantize has; it has rtn (round to nearest) and gptq (error "
                          "compensation from calibration activations)",
                          shortened_value(name)));
}

QuantFormat quant_format_from_name(const std::string& name) {
  if (name == "compressed-tensors") return QuantFormat::CompressedTensors;
  if (name == "gptq") return QuantFormat::Gptq;
  throw Error(fmt::format("format '{}' is not one ninfer-quantize writes; it writes compressed-tensors "
                          "(pack-quantized) and gptq",
                          shortened_value(name)));
}

// Published recipes keep these in bf16: lm_head decides every token, in_proj_a / in_proj_b (a
// handful of rows each) set the Gated DeltaNet decay and write strength, and the MTP head's
// drafts are only as good as its weights.
bool Recipe::quantized_by_default(ModuleRole role) {
  return role != ModuleRole::LmHead && role != ModuleRole::GdnA && role != ModuleRole::GdnB && role != ModuleRole::Mtp;
}

RoleSetting Recipe::setting(ModuleRole role) const {
  RoleSetting s{quantized_by_default(role), bits, group_size, symmetric, damp.value_or(kDefaultDamp)};
  if (auto it = modules.find(role); it != modules.end()) {
    const RoleEntry& e = it->second;
    s.quantize = e.quantize.value_or(true); // naming a role means quantizing it unless it says not
    if (e.bits) s.bits = *e.bits;
    if (e.group_size) s.group_size = *e.group_size;
    if (e.symmetric) s.symmetric = *e.symmetric;
    if (e.damp) s.damp = *e.damp;
  }
  return s;
}

Recipe default_recipe() { return Recipe{}; }

Recipe parse_recipe(const std::string& yaml_text, const std::string& origin,
                    const std::filesystem::path& schema_file) {
  const YAML::Node root = parse_validated_yaml(yaml_text, origin, schema_file);
  Recipe r;
  r.origin = origin;
  if (root["format"]) r.format = quant_format_from_name(root["format"].as<std::string>());
  if (root["method"]) r.method = quantize_method_from_name(root["method"].as<std::string>());
  if (root["bits"]) r.bits = root["bits"].as<int>();
  if (root["group_size"]) r.group_size = root["group_size"].as<int64_t>();
  if (root["symmetric"]) r.symmetric = root["symmetric"].as<bool>();
  for (const char* key : {"damp", "actorder"})
    if (root[key] && r.gptq_where.empty()) r.gptq_where = where(origin, root[key]);
  if (root["damp"]) r.damp = root["damp"].as<double>();
  if (root["actorder"]) r.actorder = root["actorder"].as<bool>();
  if (const YAML::Node mods = root["modules"]) {
    for (const auto& kv : mods) {
      const std::string name = kv.first.as<std::string>();
      const auto role = module_role_from_name(name);
      if (!role) // the schema lists the same names; kept for a schema that drifts
        throw Error(fmt::format("{}: modules: '{}' is not a module role; the roles are {}", where(origin, kv.first),
                                shortened_value(name), module_role_names()));
      RoleEntry e;
      e.where = where(origin, kv.first);
      const YAML::Node v = kv.second;
      if (v && v.IsMap()) {
        if (v["quantize"]) e.quantize = v["quantize"].as<bool>();
        if (v["bits"]) e.bits = v["bits"].as<int>();
        if (v["group_size"]) e.group_size = v["group_size"].as<int64_t>();
        if (v["symmetric"]) e.symmetric = v["symmetric"].as<bool>();
        if (v["damp"]) e.damp = v["damp"].as<double>();
      }
      r.modules[*role] = e;
    }
  }
  return r;
}

Recipe load_recipe(const std::filesystem::path& file, const std::filesystem::path& schema_file) {
  return parse_recipe(read_yaml_file(file), file.string(), schema_file);
}

namespace {

void check_damp(const std::string& where, double damp) {
  if (!(damp > 0 && damp <= 1))
    throw Error(fmt::format("{}: damp {} must be in (0, 1]: the fraction of the Hessian's mean diagonal added to its "
                            "diagonal (0.01 is usual; raise it when a Hessian is not positive definite)",
                            where, damp));
}

void check_setting(const std::string& where, int bits, int64_t group) {
  if (bits != 4 && bits != 8)
    throw Error(fmt::format("{}: bits {} is not supported; ninfer-quantize writes 4 or 8 bits", where, bits));
  if (group != kChannelGroup && group < 1)
    throw Error(fmt::format("{}: group_size {} must be -1 (one scale per output channel) or a positive number of "
                            "input channels",
                            where, group));
}

} // namespace

void apply_overrides(Recipe& recipe, const RecipeOverrides& o) {
  if (o.format) recipe.format = *o.format;
  if (o.method) recipe.method = *o.method;
  if (o.bits) recipe.bits = *o.bits;
  if (o.group_size) recipe.group_size = *o.group_size;
  std::string flags;
  if (o.format) flags += fmt::format(" --format {}", quant_format_name(*o.format));
  if (o.method) flags += fmt::format(" --method {}", quant_method_name(*o.method));
  if (o.bits) flags += fmt::format(" --bits {}", *o.bits);
  if (o.group_size) flags += fmt::format(" --group-size {}", *o.group_size);
  if (!flags.empty()) recipe.origin += " with" + flags; // messages then say where a value came from
  if (o.bits || o.group_size) check_setting(recipe.origin, recipe.bits, recipe.group_size);
}

void check_recipe(const Recipe& recipe) {
  check_setting(recipe.origin, recipe.bits, recipe.group_size);
  const bool rtn = recipe.method == QuantizeMethod::Rtn;
  // GPTQ-only keys under rtn would be silently meaningless: refused, so a recipe says what it does.
  if (rtn && (recipe.damp || recipe.actorder))
    throw Error(fmt::format("{}: {} applies to method gptq, and this recipe's method is rtn (round to nearest, no "
                            "Hessian, no column order); use method: gptq, or drop the key",
                            recipe.gptq_where.empty() ? recipe.origin : recipe.gptq_where,
                            recipe.damp ? "damp" : "actorder"));
  if (recipe.damp) check_damp(recipe.gptq_where.empty() ? recipe.origin : recipe.gptq_where, *recipe.damp);
  for (const auto& [role, e] : recipe.modules) {
    const RoleSetting s = recipe.setting(role);
    const std::string where = fmt::format("{}: modules: {}", e.where, module_role_name(role));
    if (e.damp && rtn)
      throw Error(fmt::format("{}: damp applies to method gptq, and this recipe's method is rtn; use method: gptq, "
                              "or drop the key",
                              where));
    if (e.damp) check_damp(where, *e.damp);
    if (s.quantize) check_setting(where, s.bits, s.group_size);
    // GPTQ's Hessians come from the model's forward pass on the calibration text, which never
    // runs the MTP head.
    if (role == ModuleRole::Mtp && s.quantize && !rtn)
      throw Error(fmt::format("{}: method gptq needs the inputs of every module it quantizes, and the calibration "
                              "run does not run the MTP head; quantize with method rtn, or leave mtp out",
                              where));
  }
}

} // namespace ninfer
