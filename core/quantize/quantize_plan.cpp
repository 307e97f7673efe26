#include "ninfer/quantize/quantize_plan.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "ninfer/support/error.hpp"

namespace ninfer {

namespace {

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// A 2-D ".weight" of the vision tower or MTP head other than an embedding or a norm: a linear
// layer that a loader must be told stays unquantized.
bool auxiliary_linear(const TensorView& t) {
  const std::string& n = t.name;
  if (t.shape.size() != 2 || n.size() < 7 || n.compare(n.size() - 7, 7, ".weight") != 0) return false;
  return n.find("embed") == std::string::npos && n.find("norm") == std::string::npos;
}

std::string recipe_where(const Recipe& r, ModuleRole role) {
  if (auto it = r.modules.find(role); it != r.modules.end()) return it->second.where;
  return r.origin;
}

PlannedModule plan_module(const TensorView& t, ModuleRole role, const RoleSetting& s, const Recipe& r) {
  if (t.shape.size() != 2)
    throw Error(fmt::format("{}: tensor {} has shape {}; a linear weight is 2-D [out, in]", t.file.string(), t.name,
                            shape_string(t.shape)));
  if (t.dtype != DType::F32 && t.dtype != DType::BF16 && t.dtype != DType::F16)
    throw Error(fmt::format("{}: tensor {} is {}; ninfer-quantize reads float32, bfloat16 or float16 weights",
                            t.file.string(), t.name, dtype_name(t.dtype)));
  PlannedModule m;
  m.tensor = t.name;
  m.module = t.name.substr(0, t.name.size() - std::string(".weight").size());
  m.role = role;
  m.rows = t.shape[0];
  m.cols = t.shape[1];
  m.bits = s.bits;
  m.channel = s.group_size == kChannelGroup;
  m.group = m.channel ? m.cols : s.group_size;
  m.symmetric = s.symmetric;
  m.damp = s.damp;
  m.scale_dtype = r.format == QuantFormat::Gptq ? DType::F16 : t.dtype;
  const std::string where = recipe_where(r, role);
  const std::string role_name = module_role_name(role);
  if (m.cols % m.group != 0)
    throw Error(fmt::format("{}: group_size {} (role {}) does not divide the {} input channels of {} {}; choose a "
                            "divisor of {} (--group-size or the recipe) or -1 (one scale per output channel)",
                            where, m.group, role_name, m.cols, t.name, shape_string(t.shape), m.cols));
  const int per_word = 32 / m.bits;
  if (m.cols % per_word != 0)
    throw Error(fmt::format("{}: {} {} (role {}) has {} input channels, not a multiple of {}: {}-bit values cannot "
                            "be packed into int32 words along them; leave the role unquantized",
                            where, t.name, shape_string(t.shape), role_name, m.cols, per_word, m.bits));
  if (r.format == QuantFormat::Gptq && m.rows % per_word != 0)
    throw Error(fmt::format("{}: {} {} (role {}) has {} output channels, not a multiple of {}: GPTQ's qzeros pack "
                            "{}-bit values along them; leave the role unquantized or use --format compressed-tensors",
                            where, t.name, shape_string(t.shape), role_name, m.rows, per_word, m.bits));
  return m;
}

} // namespace

GridSpec grid_spec(const PlannedModule& m, QuantFormat format) {
  return {m.bits, m.symmetric, m.scale_dtype, !m.symmetric && format == QuantFormat::Gptq ? 1 : 0};
}

QuantizePlan plan_quantization(const Checkpoint& ck, const Recipe& recipe) {
  QuantizePlan plan;
  plan.format = recipe.format;
  plan.method = recipe.method;
  plan.actorder = recipe.act_order();
  plan.weight_prefix = ck.config().weight_prefix;
  std::set<ModuleRole> present;
  for (const std::string& name : ck.names()) {
    plan.has_visual |= starts_with(name, "model.visual.");
    plan.has_mtp |= starts_with(name, "mtp.");
    const auto role = module_role_of(name, plan.weight_prefix);
    if (role) present.insert(*role);
    const RoleSetting s = role ? recipe.setting(*role) : RoleSetting{};
    if (role && s.quantize) {
      plan.quantized.push_back(plan_module(ck.tensor(name), *role, s, recipe));
      continue;
    }
    plan.copied.push_back(name);
    if (role)
      plan.unquantized_linears.push_back(name.substr(0, name.size() - 7));
    else if (Checkpoint::is_auxiliary(name) && ck.has(name) && auxiliary_linear(ck.tensor(name)))
      plan.unquantized_linears.push_back(name.substr(0, name.size() - 7));
  }
  for (const auto& [role, entry] : recipe.modules) {
    // A tied model's output projection is its embedding, which is never quantized: a recipe
    // keeping lm_head as it is holds for it too (one recipe serves a model family's sizes).
    if (role == ModuleRole::LmHead && ck.config().tie_word_embeddings && !recipe.setting(role).quantize) continue;
    if (role == ModuleRole::LmHead && ck.config().tie_word_embeddings)
      throw Error(fmt::format("{}: modules: lm_head of {} is tied to the embedding (tie_word_embeddings), which "
                              "stays unquantized; give it {{quantize: false}} or leave it out",
                              entry.where, ck.dir().string()));
    if (!present.count(role)) {
      std::vector<std::string> have;
      for (ModuleRole r : present) have.push_back(module_role_name(r));
      throw Error(fmt::format("{}: modules: {} names a module this model does not have ({}, {}); its roles are {}",
                              entry.where, module_role_name(role), ck.dir().string(),
                              ck.config().config_path.filename().string(), fmt::join(have, ", ")));
    }
  }
  for (ModuleRole r : all_module_roles())
    if (present.count(r)) plan.roles_present.push_back(r);
  if (plan.quantized.empty())
    throw Error(fmt::format("{}: the recipe quantizes no module of {}; there would be nothing to write",
                            recipe.origin, ck.dir().string()));
  return plan;
}

} // namespace ninfer
