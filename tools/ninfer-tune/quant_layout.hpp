// What ninfer-tune needs to know of a model's quantized weights beyond the planning shape
// (ninfer/abi/ops/quant_weight.h): the shape names the code dtype and, for linear, the group size
// (dims[2]: 0 with a g_idx); the scale dtype and the zero points are not in it but are what the
// model's calls read, so the tuned calls read them too.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "ninfer/abi/plugin_abi.h"
#include "ninfer/checkpoint/checkpoint.hpp"

namespace ninfer::tools {

struct QuantLayout {
  int32_t scale_dtype = NINFER_DTYPE_BF16; // F32, BF16 or F16
  bool zeros = false;                      // uint8 zero points; false: symmetric
  bool g_idx = false;                      // channels mapped to groups in any order (act order)
  int64_t group_size = 0;
  // "g128, bfloat16 scales, symmetric" (with ", zero points" or ", g_idx" where set).
  std::string describe() const;
};

// (code dtype: INT4 / INT8 / FP8_E4M3, linear's planning group: the group size, 0 with g_idx)
using QuantLayoutKey = std::pair<int32_t, int64_t>;

// The model's quantized matrices by kind, each the layout of the first such matrix in tensor
// order (zero points if any of them has some). A preset's synthetic weights are symmetric with
// bfloat16 scales (Checkpoint::synthetic); a checkpoint's are read as the loader reads them
// (read_quantized, layout only: no codes or scales are read).
std::map<QuantLayoutKey, QuantLayout> model_quant_layouts(const Checkpoint& ck);

// The layout of the model's `op` call at `shape` (a quantized dtype): linear by dtype and
// dims[2]; norm_linear, whose shape has no group, by dtype alone. Throws naming the shape when
// the model has no such weights.
QuantLayout quant_layout_for(const std::map<QuantLayoutKey, QuantLayout>& layouts, const std::string& op,
                             const ninfer_shape& shape);

} // namespace ninfer::tools
