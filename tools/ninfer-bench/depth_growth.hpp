// What each deeper decode context adds to a step. A step at depth D reads the weights and D
// cached rows per sequence, so between two measured depths the added step time should be the
// added cache bytes at the device's bandwidth. Where it is not, the attention has a cost that
// does not scale with the cache: on the H200 this view found 6.4 us per Qwen3-8B layer appearing
// between 0 and 256 keys, which a profile of one launch had not (docs/performance.md,
// "Measuring and comparing").
#pragma once

#include <cstdint>
#include <vector>

#include "bench_run.hpp"

namespace ninfer::tools {

struct DepthGrowth {
  int32_t batch = 1;
  int64_t from_context = 0, to_context = 0;
  double from_step_us = 0, to_step_us = 0; // one decode step of the batch
  double added_kv_bytes = 0;               // batch x (to - from) x KV bytes per token
  // added_kv_bytes / (to_step_us - from_step_us); 0 when the deeper step was not slower.
  double added_bytes_per_s = 0;
};

// Consecutive measured depths of each batch size, in batch then context order.
std::vector<DepthGrowth> depth_growth(const std::vector<BenchPoint>& points, const ModelCosts& costs);

} // namespace ninfer::tools
