#include "ninfer/quantize/hessian_inputs.hpp"

#include <fmt/format.h>

#include <cctype>
#include <map>
#include <tuple>

#include "ninfer/support/error.hpp"

namespace ninfer {

namespace {

// Roles reading the same rows share an input name.
const char* input_of(ModuleRole r) {
  switch (r) {
    case ModuleRole::AttnQ:
    case ModuleRole::AttnK:
    case ModuleRole::AttnV: return "self_attn";
    case ModuleRole::AttnO: return "self_attn.o_proj";
    case ModuleRole::GdnQkv:
    case ModuleRole::GdnZ:
    case ModuleRole::GdnA:
    case ModuleRole::GdnB: return "linear_attn";
    case ModuleRole::GdnOut: return "linear_attn.out_proj";
    case ModuleRole::MlpGate:
    case ModuleRole::MlpUp: return "mlp";
    case ModuleRole::MlpDown: return "mlp.down_proj";
    case ModuleRole::LmHead: return "lm_head";
    case ModuleRole::Mtp: return "mtp"; // never planned: check_recipe refuses gptq for it
  }
  return "?";
}

// The N of "<prefix>layers.N.<role>".
int64_t layer_of(const PlannedModule& m, const std::string& prefix) {
  const std::string head = prefix + "layers.";
  if (m.module.rfind(head, 0) == 0) {
    size_t i = head.size(), digits = 0;
    int64_t n = 0;
    while (i + digits < m.module.size() && std::isdigit(static_cast<unsigned char>(m.module[i + digits])))
      n = n * 10 + (m.module[i + digits++] - '0');
    if (digits > 0) return n;
  }
  throw Error(fmt::format("internal: module {} is in no decoder layer", m.module));
}

} // namespace

std::vector<HessianInput> hessian_inputs(const QuantizePlan& plan, int64_t num_layers) {
  std::map<std::pair<int64_t, std::string>, HessianInput> by_key; // layer order, then input name
  for (size_t i = 0; i < plan.quantized.size(); ++i) {
    const PlannedModule& m = plan.quantized[i];
    const bool head = m.role == ModuleRole::LmHead;
    const int64_t layer = head ? num_layers : layer_of(m, plan.weight_prefix);
    const std::string kind = input_of(m.role);
    HessianInput& in = by_key[{layer, kind}];
    if (in.modules.empty()) {
      in.name = head ? "lm_head input" : fmt::format("{}layers.{}.{} input", plan.weight_prefix, layer, kind);
      in.layer = layer;
      in.cols = m.cols;
    } else if (in.cols != m.cols) {
      throw Error(fmt::format("internal: {} reads {} features, the other modules of {} {}", m.module, m.cols, in.name,
                              in.cols));
    }
    in.modules.push_back(i);
  }
  std::vector<HessianInput> out;
  for (auto& [key, in] : by_key) out.push_back(std::move(in));
  return out;
}

std::vector<CalibrationPass> plan_passes(const std::vector<HessianInput>& inputs, uint64_t memory_limit,
                                         int64_t layers_per_pass) {
  // Inputs come in layer order; a layer's inputs always share a pass.
  std::vector<CalibrationPass> passes;
  int64_t layers_in_pass = 0;
  for (size_t i = 0; i < inputs.size();) {
    const int64_t layer = inputs[i].layer;
    uint64_t layer_bytes = 0;
    size_t end = i;
    while (end < inputs.size() && inputs[end].layer == layer) layer_bytes += inputs[end++].bytes();
    const bool fits = passes.empty() ? false
                      : layers_per_pass > 0 ? layers_in_pass < layers_per_pass
                                            : passes.back().bytes + layer_bytes <= memory_limit;
    if (!fits) {
      passes.push_back({layer, layer, {}, 0});
      layers_in_pass = 0;
    }
    CalibrationPass& p = passes.back();
    p.last_layer = layer;
    p.bytes += layer_bytes;
    for (size_t j = i; j < end; ++j) p.inputs.push_back(j);
    ++layers_in_pass;
    i = end;
  }
  return passes;
}

} // namespace ninfer
