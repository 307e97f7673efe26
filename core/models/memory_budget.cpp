// What a load on a backend may use, and where its plan is made.
#include <fmt/format.h>

#include "ninfer/models/memory_plan.hpp"
#include "ninfer/runtime/backend.hpp"

namespace ninfer {

MemoryBudget load_budget(const Backend& be) {
  MemoryBudget b;
  const MemoryReport r = be.memory();
  // A limit counts what the backend holds already (another model, a test's buffers).
  if (const size_t limit = be.memory_limit()) {
    b.limit = limit > r.total ? limit - r.total : 1;
    b.limit_source = "--memory-limit, runtime.memory_limit";
  }
  if (be.plan_only() || !r.free) return b;
  if (be.device().kind == NINFER_DEVICE_CUDA) {
    b.free = r.free;
    b.free_source = fmt::format("cudaMemGetInfo on {}", be.device().name);
  } else {
    b.free = static_cast<size_t>(static_cast<double>(r.free) * kHostMemoryShare);
    b.free_source = fmt::format("{:.0f}% of the host's available memory, {}", kHostMemoryShare * 100, format_bytes(r.free));
  }
  return b;
}

PlanTarget plan_target(const Backend& be) {
  PlanTarget t;
  t.plugin = &be.plugin();
  t.device = be.device();
  t.table = be.schedule_table();
  t.memory_device = be.device();
  return t;
}

} // namespace ninfer
