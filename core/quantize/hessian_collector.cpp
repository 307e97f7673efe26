#include "hessian_collector.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "ninfer/support/error.hpp"

namespace ninfer::quantize_detail {

HessianCollector::HessianCollector(const std::vector<HessianInput>& inputs, const QuantizePlan& plan,
                                   const CalibrationPass& pass)
    : inputs_(inputs), pass_(pass) {
  for (size_t i = 0; i < pass.inputs.size(); ++i) {
    const HessianInput& in = inputs[pass.inputs[i]];
    for (size_t m : in.modules) slot_of_[plan.quantized[m].module] = i;
    h_.emplace_back(in.cols);
  }
}

bool HessianCollector::wants(std::span<const std::string> modules) {
  for (const auto& m : modules)
    if (slot_of_.count(m)) return true;
  return false;
}

void HessianCollector::observe(const LinearInput& in) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<size_t> done; // a call's modules share their rows: one update per input
  for (const auto& m : in.modules) {
    const auto it = slot_of_.find(m);
    if (it == slot_of_.end() || std::find(done.begin(), done.end(), it->second) != done.end()) continue;
    const size_t i = it->second;
    const HessianInput& hi = inputs_[pass_.inputs[i]];
    if (in.cols != hi.cols)
      throw Error(fmt::format("internal: the runtime fed {} rows of {} features, its weight has {}", m, in.cols, hi.cols));
    h_[i].add(in.rows, in.tokens, in.cols);
    done.push_back(i);
  }
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<double> HessianCollector::take(size_t i) { return h_[i].take(); }

} // namespace ninfer::quantize_detail
