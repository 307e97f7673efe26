#include "ninfer/quantize/module_roles.hpp"

#include <cctype>

namespace ninfer {

namespace {

struct RoleName {
  ModuleRole role;
  const char* name;
};

constexpr RoleName kRoles[] = {
    {ModuleRole::AttnQ, "self_attn.q_proj"},          {ModuleRole::AttnK, "self_attn.k_proj"},
    {ModuleRole::AttnV, "self_attn.v_proj"},          {ModuleRole::AttnO, "self_attn.o_proj"},
    {ModuleRole::GdnQkv, "linear_attn.in_proj_qkv"},  {ModuleRole::GdnZ, "linear_attn.in_proj_z"},
    {ModuleRole::GdnA, "linear_attn.in_proj_a"},      {ModuleRole::GdnB, "linear_attn.in_proj_b"},
    {ModuleRole::GdnOut, "linear_attn.out_proj"},     {ModuleRole::MlpGate, "mlp.gate_proj"},
    {ModuleRole::MlpUp, "mlp.up_proj"},               {ModuleRole::MlpDown, "mlp.down_proj"},
    {ModuleRole::LmHead, "lm_head"},                  {ModuleRole::Mtp, "mtp"},
};
static_assert(std::size(kRoles) == kModuleRoleCount);

} // namespace

const std::array<ModuleRole, kModuleRoleCount>& all_module_roles() {
  static const std::array<ModuleRole, kModuleRoleCount> roles = [] {
    std::array<ModuleRole, kModuleRoleCount> r{};
    for (size_t i = 0; i < kModuleRoleCount; ++i) r[i] = kRoles[i].role;
    return r;
  }();
  return roles;
}

const char* module_role_name(ModuleRole role) {
  for (const auto& r : kRoles)
    if (r.role == role) return r.name;
  return "?";
}

std::optional<ModuleRole> module_role_from_name(std::string_view name) {
  for (const auto& r : kRoles)
    if (name == r.name) return r.role;
  return std::nullopt;
}

std::string module_role_names() {
  std::string s;
  for (const auto& r : kRoles) {
    if (!s.empty()) s += ", ";
    s += r.name;
  }
  return s;
}

namespace {

// The role of "layers.<i>.<role>" (the module's path below its model's prefix), nullopt for
// anything else; lm_head and mtp are no modules of a decoder layer.
std::optional<ModuleRole> layer_module_role(std::string_view module) {
  const std::string_view layers = "layers.";
  if (module.substr(0, layers.size()) != layers) return std::nullopt;
  module.remove_prefix(layers.size());
  size_t digits = 0;
  while (digits < module.size() && std::isdigit(static_cast<unsigned char>(module[digits]))) ++digits;
  if (digits == 0 || digits >= module.size() || module[digits] != '.') return std::nullopt;
  module.remove_prefix(digits + 1);
  const auto role = module_role_from_name(module);
  if (role == ModuleRole::LmHead || role == ModuleRole::Mtp) return std::nullopt;
  return role;
}

} // namespace

std::optional<ModuleRole> module_role_of(std::string_view tensor, std::string_view weight_prefix) {
  if (tensor == "lm_head.weight") return ModuleRole::LmHead;
  const std::string_view suffix = ".weight";
  if (tensor.size() <= suffix.size() || tensor.substr(tensor.size() - suffix.size()) != suffix) return std::nullopt;
  tensor.remove_suffix(suffix.size());
  const std::string_view mtp = "mtp.";
  if (tensor.substr(0, mtp.size()) == mtp) {
    tensor.remove_prefix(mtp.size());
    if (tensor == "fc" || layer_module_role(tensor)) return ModuleRole::Mtp;
    return std::nullopt;
  }
  if (tensor.substr(0, weight_prefix.size()) != weight_prefix) return std::nullopt;
  tensor.remove_prefix(weight_prefix.size());
  return layer_module_role(tensor);
}

} // namespace ninfer
