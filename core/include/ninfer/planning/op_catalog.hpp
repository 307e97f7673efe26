// The op contracts the core knows (one header each in ninfer/abi/ops/), with the meaning of
// their planning dims and default shapes for tools that plan without a model.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer {

struct OpInfo {
  std::string name;
  std::string summary;
  std::vector<std::string> dim_names;  // meaning of ninfer_shape::dims[i]
  std::array<int64_t, 4> default_dims; // a real model's shape (documented per op)
  int32_t default_dtype;               // ninfer_dtype
  // A fused op the core can also run as the ops it fuses (its `unfused` route, which the planner
  // takes where the plugin has no variant for a shape, or where a schedule table or
  // NINFER_UNFUSED_OPS names it; ninfer/runtime/unfused_forms.hpp).
  bool unfused_form = false;
  // The contract takes one token per sequence (a decode step): plugin variants serve a call only
  // when its shape's max_seq_tokens is 0 (not stated) or 1.
  bool one_token_per_sequence = false;
};

// The name of the core's route for a fused op that runs the ops it fuses, as schedule tables and
// plans spell it.
inline constexpr std::string_view kUnfusedRoute = "unfused";

const std::vector<OpInfo>& op_catalog();
const OpInfo* find_op(std::string_view name);
// Throws ninfer::Error listing the known ops.
const OpInfo& require_op(std::string_view name);

} // namespace ninfer
