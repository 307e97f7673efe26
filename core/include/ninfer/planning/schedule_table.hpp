// Schedule tables: per op and token-count bucket, the variant a plugin should use. Built-in
// tables ship per architecture (arch/schedules/<arch>.yaml); a per-device table written by
// ninfer-tune overrides them. Tables are validated by schemas/schedule.schema.json, then
// checked against the plugin and the real (or described) device: an entry that names an
// unknown op or a variant the plugin does not have is an error naming its FILE:LINE; an entry
// whose launch could not be legal there (or a jit_ variant that cannot be built) is dropped
// with a warning naming it, and the planner's own choice is used for its bucket. The variant
// `unfused` of a fused op routes it to the ops it fuses (OpInfo::unfused_form).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ninfer/abi/device_info.h"
#include "ninfer/abi/plugin_abi.h"

namespace ninfer {

struct LoadedPlugin;

struct ScheduleEntry {
  std::string op;
  int64_t tokens_min = 1;
  int64_t tokens_max = 1;
  std::string variant;
  std::optional<int64_t> max_ctas; // cap on CTAs per launch (cooperative variants)
  std::string where;               // "FILE:LINE", for messages
  // Ranges [min, max] of the call shape's dims[0], dims[1], ... (the op's own meaning, e.g.
  // linear: in_features, out_features); dims past the list are unconstrained. Lets one token
  // bucket route different matrices of a model differently.
  std::vector<std::pair<int64_t, int64_t>> dims;
  // Weight / input dtypes (ninfer_dtype) the entry serves; empty: every dtype. Lets quantized
  // linears (int4, int8, fp8_e4m3) take their own variants in the buckets of the float ones.
  std::vector<int32_t> dtypes;

  // Whether the entry serves `op` at this shape (its token bucket, dims ranges and dtypes).
  bool covers(std::string_view op, const ninfer_shape& shape) const;
  // "bucket [1, 1]", with " dims[0] in [8192, 1048576]" per dims range and " dtypes int4,int8".
  std::string describe_bucket() const;
};

// The card, driver and plugin a tuned table was measured with; a table is used only where all
// of them match (measurements do not carry over to another card, driver or plugin build).
struct ScheduleDevice {
  std::string name;
  int32_t sm_count = 0;
  int32_t driver_version = 0;
  std::string plugin, plugin_version;
  bool operator==(const ScheduleDevice&) const = default;
  std::string describe() const; // "NVIDIA H200 (132 SMs), driver 13000, plugin cuda-sm90 0.1.0"
};

struct ScheduleTable {
  std::string source; // file name, or "(none)"
  std::string arch;
  std::optional<ScheduleDevice> device; // tuned tables only
  std::vector<ScheduleEntry> entries;
  std::vector<std::string> warnings; // entries dropped by check_against()

  // First entry that covers `op` at `shape` (ScheduleEntry::covers), or nullptr.
  const ScheduleEntry* lookup(std::string_view op, const ninfer_shape& shape) const;
};

// Parses and validates a table file. Throws ninfer::Error ("FILE:LINE: KEY: ...").
ScheduleTable load_schedule_table(const std::filesystem::path& file,
                                  const std::filesystem::path& schema_dir);

// Throws ninfer::Error ("FILE:LINE: ...") for an entry naming an unknown op or a variant that
// `plugin` does not have; drops entries that cannot be used on `device`, recording a warning
// for each.
void check_against(ScheduleTable& table, const LoadedPlugin& plugin, const ninfer_device_info& device);

// The built-in table for a plugin's architecture, checked against `device`; an empty table
// when the architecture ships none.
ScheduleTable builtin_schedule_table(const LoadedPlugin& plugin, const ninfer_device_info& device);

// --- tuned tables (ninfer-tune) ------------------------------------------------------------
// What a tuned table for `plugin` on this live `device` must say it was measured on.
ScheduleDevice schedule_device(const LoadedPlugin& plugin, const ninfer_device_info& device);
// <cache_root()>/schedules/<plugin>-<device name>-<SMs>sm.yaml
std::filesystem::path tuned_table_path(const LoadedPlugin& plugin, const ninfer_device_info& device);
// Writes `table` (device block included) as YAML, atomically: a temporary file in the same
// folder, flushed, then renamed over `file`, so no reader ever sees half a table.
void save_schedule_table(const ScheduleTable& table, const std::filesystem::path& file);
// The table a backend uses unless told otherwise: the tuned table for this device when one
// exists and was measured on this very card, driver and plugin build (it is logged), else the
// built-in one. A tuned table for anything else is refused with a warning that says what differs.
ScheduleTable default_schedule_table(const LoadedPlugin& plugin, const ninfer_device_info& device);

} // namespace ninfer
