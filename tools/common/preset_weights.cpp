#include "preset_weights.hpp"

#include <fmt/format.h>

#include <charconv>

#include "ninfer/checkpoint/expected_tensors.hpp"
#include "ninfer/checkpoint/quantized_tensors.hpp"
#include "ninfer/checkpoint/shape_presets.hpp"
#include "ninfer/quantize/quantize_plan.hpp"
#include "ninfer/quantize/recipe.hpp"
#include "ninfer/support/error.hpp"
#include "tool_cli.hpp"

namespace ninfer::tools {
namespace {

constexpr const char* kAccepted =
    "int4-gN or int8-gN (groups of N columns, e.g. int4-g128), int4-channel, int8-channel, fp8 (blocks of 128), "
    "bfloat16";
constexpr int64_t kFp8Block = 128; // Qwen's -FP8 releases: weight_block_size [128, 128]

} // namespace

std::optional<SyntheticQuant> parse_weights_spec(const std::string& spec, const char* flag) {
  if (spec == "bfloat16" || spec == "bf16") return std::nullopt;
  if (spec == "fp8") return SyntheticQuant{QuantCodes::Fp8E4M3, kFp8Block};
  SyntheticQuant q;
  std::string rest;
  if (spec.rfind("int4-", 0) == 0) {
    q.codes = QuantCodes::Int4;
  } else if (spec.rfind("int8-", 0) == 0) {
    q.codes = QuantCodes::Int8;
  } else {
    throw UsageError(fmt::format("{} {}: expected {}", flag, spec, kAccepted));
  }
  rest = spec.substr(5);
  if (rest == "channel") {
    q.group_size = kChannelGroup;
    return q;
  }
  int64_t g = 0;
  const char* end = rest.data() + rest.size();
  if (rest.size() < 2 || rest[0] != 'g' || std::from_chars(rest.data() + 1, end, g).ptr != end || g < 1)
    throw UsageError(fmt::format("{} {}: expected {}", flag, spec, kAccepted));
  q.group_size = g;
  return q;
}

std::map<std::string, SyntheticQuant> quantized_tensors(const ModelConfig& config, const SyntheticQuant& q) {
  // The default recipe's plan over the float form of the shape: its module choice, and its
  // checks of group sizes against each tensor's columns.
  const Checkpoint shape = Checkpoint::synthetic(config, DType::BF16, 0);
  Recipe recipe = default_recipe();
  recipe.bits = q.codes == QuantCodes::Int4 ? 4 : 8;
  recipe.group_size = q.group_size;
  std::map<std::string, SyntheticQuant> out;
  for (const PlannedModule& m : plan_quantization(shape, recipe).quantized) {
    SyntheticQuant t = q;
    if (t.group_size == kChannelGroup) t.group_size = m.cols;
    out.emplace(m.tensor, t);
  }
  return out;
}

std::map<std::string, SyntheticQuant> quantized_mtp_tensors(const ModelConfig& config, const SyntheticQuant& q) {
  std::map<std::string, SyntheticQuant> out;
  for (const ExpectedTensor& e : mtp_tensors(config)) {
    if (e.role != TensorRole::Linear) continue;
    SyntheticQuant t = q;
    const int64_t cols = e.shape[1];
    if (t.group_size == kChannelGroup) t.group_size = cols;
    if (cols % t.group_size != 0)
      throw UsageError(fmt::format("--mtp-weights: group size {} does not divide {}'s {} columns", t.group_size,
                                   e.name, cols));
    out.emplace(e.name, t);
  }
  return out;
}

Checkpoint preset_checkpoint(const std::string& preset, DType dtype, uint64_t seed, bool mtp_head,
                             const std::string& weights, const std::string& mtp_weights) {
  ModelConfig cfg = shape_preset_config(preset);
  if (mtp_head) {
    if (cfg.layer_types.size() == static_cast<size_t>(cfg.num_layers_of(LayerKind::FullAttention)))
      throw Error(fmt::format("--spec mtp: preset {} is a dense Qwen3 shape, which has no MTP head; use a qwen3_5 "
                              "preset",
                              preset));
    cfg.mtp_num_hidden_layers = 1;
  }
  std::map<std::string, SyntheticQuant> quantized;
  if (const auto q = parse_weights_spec(weights)) quantized = quantized_tensors(cfg, *q);
  if (const auto q = parse_weights_spec(mtp_weights, "--mtp-weights")) quantized.merge(quantized_mtp_tensors(cfg, *q));
  return Checkpoint::synthetic(cfg, dtype, seed, std::move(quantized));
}

std::string weights_label(const SyntheticQuant& q) {
  if (q.codes == QuantCodes::Fp8E4M3) return fmt::format("fp8 g{}", q.group_size);
  return q.group_size == kChannelGroup ? fmt::format("{} channel", quant_codes_name(q.codes))
                                       : fmt::format("{} g{}", quant_codes_name(q.codes), q.group_size);
}

} // namespace ninfer::tools
