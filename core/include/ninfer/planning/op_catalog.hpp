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
};

const std::vector<OpInfo>& op_catalog();
const OpInfo* find_op(std::string_view name);
// Throws ninfer::Error listing the known ops.
const OpInfo& require_op(std::string_view name);

} // namespace ninfer
