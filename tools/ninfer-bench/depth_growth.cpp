#include "depth_growth.hpp"

#include <algorithm>
#include <map>

namespace ninfer::tools {

std::vector<DepthGrowth> depth_growth(const std::vector<BenchPoint>& points, const ModelCosts& costs) {
  std::map<int32_t, std::vector<const BenchPoint*>> by_batch;
  for (const BenchPoint& p : points)
    if (!p.prefill && p.tok_s.median > 0) by_batch[p.batch].push_back(&p);
  std::vector<DepthGrowth> out;
  for (auto& [batch, list] : by_batch) {
    std::sort(list.begin(), list.end(), [](const BenchPoint* a, const BenchPoint* b) { return a->context < b->context; });
    for (size_t i = 1; i < list.size(); ++i) {
      const BenchPoint &a = *list[i - 1], &b = *list[i];
      DepthGrowth g;
      g.batch = batch;
      g.from_context = a.context;
      g.to_context = b.context;
      g.from_step_us = 1e6 * batch / a.tok_s.median;
      g.to_step_us = 1e6 * batch / b.tok_s.median;
      g.added_kv_bytes = static_cast<double>(batch) * static_cast<double>(b.context - a.context) * costs.kv_bytes_per_token;
      const double added_s = (g.to_step_us - g.from_step_us) * 1e-6;
      g.added_bytes_per_s = added_s > 0 ? g.added_kv_bytes / added_s : 0.0;
      out.push_back(g);
    }
  }
  return out;
}

} // namespace ninfer::tools
