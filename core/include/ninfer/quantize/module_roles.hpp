// The linear modules a quantization recipe can name, by their role in a Qwen3 / Qwen3.5 text
// model, and the role of a checkpoint tensor (core/checkpoint/expected_tensors.cpp has the
// names). Only `.weight` tensors of these modules can be quantized; embeddings, norms, the
// Gated DeltaNet conv1d, A_log and dt_bias and the vision tower never are. The MTP head's
// linears (mtp.fc and its decoder layer's projections) are one role, `mtp`.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ninfer {

enum class ModuleRole {
  AttnQ,    // self_attn.q_proj
  AttnK,    // self_attn.k_proj
  AttnV,    // self_attn.v_proj
  AttnO,    // self_attn.o_proj
  GdnQkv,   // linear_attn.in_proj_qkv
  GdnZ,     // linear_attn.in_proj_z
  GdnA,     // linear_attn.in_proj_a
  GdnB,     // linear_attn.in_proj_b
  GdnOut,   // linear_attn.out_proj
  MlpGate,  // mlp.gate_proj
  MlpUp,    // mlp.up_proj
  MlpDown,  // mlp.down_proj
  LmHead,   // lm_head (untied output projection)
  Mtp,      // mtp.fc and mtp.layers.<i>.<an attention or MLP projection above>
};
inline constexpr size_t kModuleRoleCount = 14;

// Every role, in the order above.
const std::array<ModuleRole, kModuleRoleCount>& all_module_roles();

// The name a recipe uses: the module's path inside a decoder layer ("self_attn.q_proj",
// "linear_attn.in_proj_qkv", "mlp.down_proj"), "lm_head" or "mtp".
const char* module_role_name(ModuleRole role);
std::optional<ModuleRole> module_role_from_name(std::string_view name);
// "self_attn.q_proj, self_attn.k_proj, ..." for messages.
std::string module_role_names();

// The role of checkpoint tensor `tensor` when it is the weight of one of these modules in the
// text model whose weights sit under `weight_prefix` ("model." or "model.language_model."):
// "<prefix>layers.<i>.<role>.weight", "lm_head.weight", or an MTP head linear ("mtp.fc.weight",
// "mtp.layers.<i>.<role>.weight"). nullopt for any other tensor.
std::optional<ModuleRole> module_role_of(std::string_view tensor, std::string_view weight_prefix);

} // namespace ninfer
