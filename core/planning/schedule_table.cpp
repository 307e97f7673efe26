#include "ninfer/planning/schedule_table.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "ninfer/support/error.hpp"
#include "ninfer/planning/occupancy.hpp"
#include "ninfer/planning/op_catalog.hpp"
#include "ninfer/support/paths.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/support/yaml_schema.hpp"

namespace ninfer {
namespace {

// The schema admits the names ninfer_dtype_name gives.
int32_t dtype_from_name(const std::string& name) {
  for (int32_t d = NINFER_DTYPE_F32; d <= NINFER_DTYPE_KV_INT4R; ++d)
    if (name == ninfer_dtype_name(d)) return d;
  throw Error(fmt::format("unknown dtype '{}'", name));
}

} // namespace

bool ScheduleEntry::covers(std::string_view name, const ninfer_shape& shape) const {
  if (op != name || shape.tokens < tokens_min || shape.tokens > tokens_max) return false;
  for (size_t i = 0; i < dims.size(); ++i)
    if (shape.dims[i] < dims[i].first || shape.dims[i] > dims[i].second) return false;
  return dtypes.empty() || std::find(dtypes.begin(), dtypes.end(), shape.dtype) != dtypes.end();
}

std::string ScheduleEntry::describe_bucket() const {
  std::string s = fmt::format("bucket [{}, {}]", tokens_min, tokens_max);
  for (size_t i = 0; i < dims.size(); ++i) s += fmt::format(" dims[{}] in [{}, {}]", i, dims[i].first, dims[i].second);
  for (size_t i = 0; i < dtypes.size(); ++i) s += fmt::format("{}{}", i ? "," : " dtypes ", ninfer_dtype_name(dtypes[i]));
  return s;
}

const ScheduleEntry* ScheduleTable::lookup(std::string_view op, const ninfer_shape& shape) const {
  for (const auto& e : entries)
    if (e.covers(op, shape)) return &e;
  return nullptr;
}

ScheduleTable load_schedule_table(const std::filesystem::path& file,
                                  const std::filesystem::path& schema_dir) {
  YAML::Node root = load_validated_yaml(file, schema_dir / "schedule.schema.json");
  ScheduleTable t;
  t.source = file.filename().string();
  t.arch = root["arch"].as<std::string>();
  if (const YAML::Node d = root["device"]) {
    ScheduleDevice sd;
    sd.name = d["name"].as<std::string>();
    sd.sm_count = d["sm_count"].as<int32_t>();
    if (d["driver_version"]) sd.driver_version = d["driver_version"].as<int32_t>();
    if (d["plugin"]) sd.plugin = d["plugin"].as<std::string>();
    if (d["plugin_version"]) sd.plugin_version = d["plugin_version"].as<std::string>();
    t.device = sd;
  }
  if (root["entries"]) {
    for (const auto& n : root["entries"]) {
      ScheduleEntry e;
      e.op = n["op"].as<std::string>();
      e.tokens_min = n["tokens"][0].as<int64_t>();
      e.tokens_max = n["tokens"][1].as<int64_t>();
      e.variant = n["variant"].as<std::string>();
      if (n["max_ctas"]) e.max_ctas = n["max_ctas"].as<int64_t>();
      e.where = where(file.string(), n);
      if (e.tokens_min > e.tokens_max)
        throw Error(fmt::format("{}: tokens: bucket [{}, {}] is empty (min must be <= max)", e.where,
                                e.tokens_min, e.tokens_max));
      for (const auto& r : n["dims"]) {
        e.dims.emplace_back(r[0].as<int64_t>(), r[1].as<int64_t>());
        if (e.dims.back().first > e.dims.back().second)
          throw Error(fmt::format("{}: dims[{}]: range [{}, {}] is empty (min must be <= max)", e.where,
                                  e.dims.size() - 1, e.dims.back().first, e.dims.back().second));
      }
      for (const auto& d : n["dtypes"]) e.dtypes.push_back(dtype_from_name(d.as<std::string>()));
      t.entries.push_back(std::move(e));
    }
  }
  return t;
}

void check_against(ScheduleTable& table, const LoadedPlugin& plugin, const ninfer_device_info& device) {
  std::vector<ScheduleEntry> kept;
  auto drop = [&](const ScheduleEntry& e, const std::string& why) {
    table.warnings.push_back(fmt::format("{}: schedule entry {} tokens [{}, {}] -> {} rejected: {}; "
                                         "the planner's own choice is used",
                                         e.where, e.op, e.tokens_min, e.tokens_max, e.variant, why));
    spdlog::warn("{}", table.warnings.back());
  };
  if (table.arch != plugin.arch()) {
    for (const auto& e : table.entries)
      drop(e, fmt::format("table is for {}, plugin {} is {}", table.arch, plugin.name(), plugin.arch()));
    table.entries.clear();
    return;
  }
  // A name that is nobody's variant is a mistake in the table, not a property of the device:
  // the load fails and says where.
  auto refused = [&](const ScheduleEntry& e, const std::string& why) {
    return Error(fmt::format("{}: schedule entry {} tokens [{}, {}] -> {}: {}", e.where, e.op, e.tokens_min,
                            e.tokens_max, e.variant, why));
  };
  for (const auto& e : table.entries) {
    const OpInfo* op = find_op(e.op);
    if (!op) throw refused(e, "unknown op (ninfer-info --list-ops lists them)");
    if (e.variant == kUnfusedRoute) {
      if (!op->unfused_form) throw refused(e, "the op is not a fused op; it has no unfused route");
      kept.push_back(e);
      continue;
    }
    // A variant the plugin makes on demand is built here, before any launch is recorded; one that
    // cannot be made for this device is dropped like a variant that cannot be resident.
    const ninfer_variant* v = nullptr;
    std::string why_unknown;
    try {
      v = plugin.resolve_variant(device, e.op, e.variant, &why_unknown);
    } catch (const Error& err) {
      drop(e, err.what());
      continue;
    }
    if (!v) {
      std::string known;
      for (const ninfer_variant* k : plugin.variants_for(e.op)) known += fmt::format("{}{}", known.empty() ? "" : ", ", k->name);
      throw refused(e, fmt::format("plugin {} has no variant '{}' of {}{} (it has: {}; `{}` runs the ops a fused op fuses)",
                                   plugin.name(), e.variant, e.op, why_unknown.empty() ? "" : ": " + why_unknown,
                                   known.empty() ? "none" : known, kUnfusedRoute));
    }
    if (v->exec == NINFER_EXEC_CUDA) {
      // Static resources only here; shape-dependent shared memory is checked per plan.
      const Occupancy occ = occupancy(v->resources, 0, device);
      if (occ.blocks_per_sm == 0) {
        drop(e, fmt::format("variant cannot run on {} ({})", device.name, occ.limiter));
        continue;
      }
      if (e.max_ctas && v->cooperative && *e.max_ctas > occ.residency) {
        drop(e, fmt::format("max_ctas {} exceeds the {} CTAs that can be resident on {} "
                            "({} per SM x {} SMs)",
                            *e.max_ctas, occ.residency, device.name, occ.blocks_per_sm, device.sm_count));
        continue;
      }
      if (e.max_ctas && *e.max_ctas < v->split_k) {
        drop(e, fmt::format("max_ctas {} is below the variant's {} CTAs per token tile", *e.max_ctas,
                            v->split_k));
        continue;
      }
    }
    kept.push_back(e);
  }
  table.entries = std::move(kept);
}

ScheduleTable builtin_schedule_table(const LoadedPlugin& plugin, const ninfer_device_info& device) {
  const auto file = data_dir() / "arch" / "schedules" / (plugin.arch() + ".yaml");
  if (!std::filesystem::exists(file)) return ScheduleTable{"(none)", plugin.arch(), {}, {}};
  ScheduleTable t = load_schedule_table(file, data_dir() / "schemas");
  check_against(t, plugin, device);
  return t;
}

} // namespace ninfer
