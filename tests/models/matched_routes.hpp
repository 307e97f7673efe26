// A CPU backend whose schedule table routes gated_delta_step to its unfused form at every token
// count: the arithmetic a speculative verification pass uses (it has several tokens per
// sequence), so decode steps on it compute the very bits a round computes.
#pragma once

#include "model_test_env.hpp"
#include "ninfer/abi/ops/gated_delta_step.h"
#include "ninfer/planning/op_catalog.hpp"
#include "ninfer/planning/schedule_table.hpp"

namespace ninfer::test {

class MatchedRoutes {
 public:
  MatchedRoutes() {
    table_.source = "matched_routes";
    table_.arch = "cpu";
    table_.entries.push_back({NINFER_OP_GATED_DELTA_STEP, 1, 1 << 20, std::string(kUnfusedRoute), {}, "matched_routes:1", {}, {}});
    check_against(table_, cpu(), host_device());
  }
  MatchedRoutes(const MatchedRoutes&) = delete; // backends keep a pointer to the table
  MatchedRoutes& operator=(const MatchedRoutes&) = delete;
  Backend backend() const { return Backend(cpu(), host_device(), BackendOptions{"", 0, &table_, false}); }

 private:
  static const LoadedPlugin& cpu() { return *model_test_plugins().find("cpu"); }
  ScheduleTable table_;
};

} // namespace ninfer::test
