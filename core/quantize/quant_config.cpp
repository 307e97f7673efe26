#include "ninfer/quantize/quant_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

namespace ninfer {

namespace {

using json = nlohmann::ordered_json;

// Modules sharing one (bits, group size or per-channel, grid) setting.
struct Setting {
  int bits;
  int64_t group; // kChannelGroup for one scale per output channel
  bool symmetric;
  auto operator<=>(const Setting&) const = default;
};

Setting setting_of(const PlannedModule& m) { return {m.bits, m.channel ? kChannelGroup : m.group, m.symmetric}; }

// The setting most modules use (the config's default); the others become per-role overrides.
Setting main_setting(const QuantizePlan& plan) {
  std::map<Setting, size_t> count;
  for (const auto& m : plan.quantized) ++count[setting_of(m)];
  Setting best{4, 128, true};
  size_t most = 0;
  for (const auto& [s, n] : count)
    if (n > most) best = s, most = n;
  return best;
}

// Decoder-layer and lm_head roles whose modules use setting `s`, each once, in role order (the
// MTP head's rule is written on its own: mtp_setting).
std::vector<ModuleRole> roles_with(const QuantizePlan& plan, const Setting& s) {
  std::vector<ModuleRole> out;
  for (ModuleRole r : all_module_roles())
    for (const auto& m : plan.quantized)
      if (m.role == r && r != ModuleRole::Mtp && setting_of(m) == s) {
        out.push_back(r);
        break;
      }
  return out;
}

// The MTP head's setting when the plan quantizes it (one role: one setting).
std::optional<Setting> mtp_setting(const QuantizePlan& plan) {
  for (const auto& m : plan.quantized)
    if (m.role == ModuleRole::Mtp) return setting_of(m);
  return std::nullopt;
}

// A regex for every module of a role: "re:.*\.mlp\.down_proj$" style, without the "re:". The
// decoder roles' patterns match the MTP head's layer too ("mtp.layers.0.mlp.down_proj"), so the
// head's rule is written before them where it is quantized.
std::string role_regex(ModuleRole r) {
  if (r == ModuleRole::LmHead) return "lm_head$";
  if (r == ModuleRole::Mtp) return "mtp\\..*";
  std::string name = module_role_name(r), escaped;
  for (char c : name) escaped += c == '.' ? std::string("\\.") : std::string(1, c);
  return ".*\\." + escaped + "$";
}

// actorder "group": g_idx gives each input channel the group GPTQ quantized it in.
json ct_weights(const Setting& s, bool actorder) {
  json w;
  w["num_bits"] = s.bits;
  w["type"] = "int";
  w["symmetric"] = s.symmetric;
  w["group_size"] = s.group == kChannelGroup ? json(nullptr) : json(s.group);
  w["strategy"] = s.group == kChannelGroup ? "channel" : "group";
  w["block_structure"] = nullptr;
  w["dynamic"] = false;
  w["actorder"] = actorder ? json("group") : json(nullptr);
  w["observer"] = "minmax";
  w["observer_kwargs"] = json::object();
  return w;
}

json ct_group(const json& targets, const Setting& s, bool actorder) {
  json g;
  g["targets"] = targets;
  g["weights"] = ct_weights(s, actorder);
  g["input_activations"] = nullptr;
  g["output_activations"] = nullptr;
  g["format"] = "pack-quantized";
  return g;
}

json compressed_tensors(const QuantizePlan& plan) {
  const Setting main = main_setting(plan);
  json groups = json::object();
  groups["group_0"] = ct_group(json::array({"Linear"}), main, plan.actorder);
  // A group naming a module beats the Linear one, and the first naming it decides.
  if (const auto mtp = mtp_setting(plan))
    groups["group_1"] = ct_group(json::array({"re:" + role_regex(ModuleRole::Mtp)}), *mtp, plan.actorder);
  std::map<Setting, bool> seen{{main, true}};
  for (const auto& m : plan.quantized) {
    const Setting s = setting_of(m);
    if (seen[s]) continue;
    json targets = json::array();
    for (ModuleRole r : roles_with(plan, s)) targets.push_back("re:" + role_regex(r));
    if (targets.empty()) continue; // the MTP head's alone: its group is above
    seen[s] = true;
    groups[fmt::format("group_{}", groups.size())] = ct_group(targets, s, plan.actorder);
  }
  json c;
  c["config_groups"] = groups;
  c["format"] = "pack-quantized";
  c["global_compression_ratio"] = nullptr;
  c["ignore"] = plan.unquantized_linears;
  c["kv_cache_scheme"] = nullptr;
  c["quant_method"] = "compressed-tensors";
  c["quantization_status"] = "compressed";
  c["sparsity_config"] = json::object();
  c["transform_config"] = json::object();
  c["version"] = "0.12.2";
  return c;
}

json gptq(const QuantizePlan& plan) {
  const Setting main = main_setting(plan);
  json dynamic = json::object();
  auto rule = [](const Setting& s) { return json{{"bits", s.bits}, {"group_size", s.group}, {"sym", s.symmetric}}; };
  // A loader stops at the first rule a module matches: the MTP head's first (the decoder roles'
  // patterns match its layer too), then the exclusions.
  const std::optional<Setting> mtp = mtp_setting(plan);
  if (mtp) dynamic["+:" + role_regex(ModuleRole::Mtp)] = rule(*mtp);
  for (ModuleRole r : plan.roles_present) {
    if (r == ModuleRole::LmHead || r == ModuleRole::Mtp) continue; // said by "lm_head" and below
    bool quantized = false;
    for (const auto& m : plan.quantized) quantized |= m.role == r;
    if (!quantized) dynamic["-:" + role_regex(r).substr(0, role_regex(r).size() - 1) + ".*"] = json::object();
  }
  if (plan.has_visual) dynamic["-:.*visual\\..*"] = json::object();
  if (plan.has_mtp && !mtp) dynamic["-:.*mtp\\..*"] = json::object();
  std::map<Setting, bool> seen{{main, true}};
  for (const auto& m : plan.quantized) {
    const Setting s = setting_of(m);
    if (seen[s]) continue;
    seen[s] = true;
    for (ModuleRole r : roles_with(plan, s)) dynamic["+:" + role_regex(r)] = rule(s);
  }
  json in_block = json::array();
  bool lm_head = false;
  for (ModuleRole r : plan.roles_present) {
    bool quantized = false;
    for (const auto& m : plan.quantized) quantized |= m.role == r;
    if (r == ModuleRole::LmHead) lm_head = quantized;
    else if (quantized && r != ModuleRole::Mtp) in_block.push_back(module_role_name(r));
  }
  json c;
  c["quant_method"] = "gptq";
  c["checkpoint_format"] = "gptq";
  c["bits"] = main.bits;
  c["group_size"] = main.group;
  c["sym"] = main.symmetric;
  c["desc_act"] = plan.actorder;
  c["static_groups"] = false;
  c["lm_head"] = lm_head;
  c["dynamic"] = dynamic;
  c["modules_in_block_to_quantize"] = json::array({in_block});
  c["meta"] = {{"quantizer", json::array({"ninfer-quantize"})}, {"method", quant_method_name(plan.method)}};
  if (plan.method == QuantizeMethod::Gptq) {
    // The most common damp; activations come from the float model for every layer at once.
    std::map<double, size_t> damps;
    for (const auto& m : plan.quantized) ++damps[m.damp];
    c["meta"]["damp_percent"] = std::max_element(damps.begin(), damps.end(), [](auto& a, auto& b) {
                                  return a.second < b.second;
                                })->first;
    c["meta"]["true_sequential"] = false;
  }
  return c;
}

} // namespace

nlohmann::ordered_json quantization_config(const QuantizePlan& plan) {
  return plan.format == QuantFormat::Gptq ? gptq(plan) : compressed_tensors(plan);
}

} // namespace ninfer
