#include "ninfer/op_catalog.hpp"

#include <fmt/format.h>

#include "ninfer/abi/ops/gdn_gating.h"
#include "ninfer/abi/plugin_abi.h"
#include "ninfer/error.hpp"

namespace ninfer {

const std::vector<OpInfo>& op_catalog() {
  static const std::vector<OpInfo> ops = {
      {NINFER_OP_GDN_GATING,
       "Gated DeltaNet gating projection: g = -exp(A_log)*softplus(x.W_a^T + dt_bias), "
       "beta = sigmoid(x.W_b^T)",
       {"hidden", "heads"},
       {5120, 48, 0, 0}, // Qwen3.5-27B: hidden 5120, 48 linear-attention value heads
       NINFER_DTYPE_BF16},
  };
  return ops;
}

const OpInfo* find_op(std::string_view name) {
  for (const auto& op : op_catalog())
    if (op.name == name) return &op;
  return nullptr;
}

const OpInfo& require_op(std::string_view name) {
  if (const OpInfo* op = find_op(name)) return *op;
  std::string known;
  for (const auto& op : op_catalog()) known += (known.empty() ? "" : ", ") + op.name;
  throw Error(fmt::format("unknown op '{}'; registered ops: {} (see ninfer-info --list-ops)", name, known));
}

} // namespace ninfer
