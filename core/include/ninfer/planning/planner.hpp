// The occupancy planner: turns (op, shape) into launches for one plugin on one device.
//
// Every number comes from the device description and the variant's compiled resources:
// blocks per SM from the occupancy rules, residency = blocks/SM x SM count, and from those
// the route (which variant), how many launches, and each launch's grid. A cooperative launch
// never has more CTAs than can be resident: when a token range would need more, the planner
// slices it into several launches. Planning never touches a device, so it works for cards we
// do not have.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ninfer/abi/device_info.h"
#include "ninfer/abi/plugin_abi.h"

namespace ninfer {

struct LoadedPlugin;
struct ScheduleTable;

struct PlannedLaunch {
  int64_t token_begin = 0;
  int64_t token_end = 0;
  int32_t grid_x = 0;
  int32_t grid_y = 0;
  int32_t block = 0;
  size_t dynamic_smem = 0;
  size_t workspace_bytes = 0;
  int64_t ctas() const { return static_cast<int64_t>(grid_x) * grid_y; }
};

struct Plan {
  std::string op;
  std::string plugin;
  std::string variant; // also the route name: "split8", "unsplit", "reference", "unfused"
  const ninfer_variant* v = nullptr; // null for the unfused route
  // The core's unfused form of a fused op (OpInfo::unfused_form): no launch of its own; running
  // it runs the ops it fuses, each planned for its own shape (ninfer/runtime/unfused_forms.hpp).
  bool unfused = false;
  ninfer_shape shape{};
  ninfer_device_info device{};
  bool cooperative = false;
  bool host = false;        // host variant: no grid, no residency
  bool library = false;     // NINFER_GEOMETRY_LIBRARY: one call sizes its own grids
  int blocks_per_sm = 0;
  int64_t residency = 0;
  std::string limiter;
  double wave_efficiency = 0;
  std::string source;       // "planner" or the schedule entry's FILE:LINE
  std::string reason;       // why this variant
  std::vector<std::string> warnings;
  std::vector<PlannedLaunch> launches;
  size_t workspace_bytes = 0; // the largest launch's; one buffer serves all (stream-ordered)
};

// Ops named by a comma-separated list: `op`, or `op@D0xD1` for the calls whose planning shape
// has those first two dims (linear@4096x4096: one projection of a model).
class OpList {
 public:
  OpList() = default;
  explicit OpList(std::string_view list);
  // The list in environment variable `name` (empty when unset); the first read of each variable
  // in the process logs it with `effect`.
  static OpList from_env(const char* name, const char* effect);
  bool names(std::string_view op, const ninfer_shape& shape) const;
  bool empty() const { return list_.empty(); }

 private:
  std::string list_; // ",a,b@1x2," or empty
};

// The route override of NINFER_UNFUSED_OPS: fused ops it names run as the ops they fuse (an A/B
// switch for a fused kernel against its components; results stay correct).
OpList unfused_ops_from_env();

class Planner {
 public:
  // `table` may be null (planner's own choices only). The plugin and table must outlive it.
  // Fused ops named in `unfused` take their unfused route whatever the table says.
  Planner(const LoadedPlugin& plugin, const ninfer_device_info& device, const ScheduleTable* table = nullptr,
          OpList unfused = unfused_ops_from_env());

  // The route for (op, shape), decided here and only here: the unfused override, then a schedule
  // table entry (a plugin variant, or `unfused` for a fused op), then the planner's own choice
  // among the plugin's variants, and for a fused op the plugin cannot run, its unfused form.
  // Throws ninfer::Error when none of them can compute the op on this device.
  Plan plan(std::string_view op, const ninfer_shape& shape) const;
  // Plans one named variant (tests, ninfer-tune); `max_ctas` <= 0 means no cap beyond
  // residency. Throws when the variant cannot run on this device for this shape.
  Plan plan_variant(const ninfer_variant& v, const ninfer_shape& shape, int64_t max_ctas = 0) const;

 private:
  Plan unfused_plan(std::string_view op, const ninfer_shape& shape, std::string source, std::string reason) const;

  const LoadedPlugin& plugin_;
  ninfer_device_info device_;
  const ScheduleTable* table_;
  OpList unfused_;
};

// Runs a plan's launches in order on `stream` (a cudaStream_t, or null for host variants).
// `workspace` must hold plan.workspace_bytes; `tickets` are the launches' shared counters
// (ninfer_launch.tickets: the caller's own, zero; null where the caller has none). Throws
// ninfer::Error naming op, variant and launch when a launch fails.
void execute(const Plan& plan, const void* args, void* workspace, void* stream, uint32_t* tickets = nullptr);

} // namespace ninfer
