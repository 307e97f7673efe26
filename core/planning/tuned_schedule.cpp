// Tuned schedule tables: where ninfer-tune writes them, how they are written (atomically), and
// which table a backend picks by default (docs/tuning.md).
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cstdio>
#include <fstream>

#include "ninfer/devices/device.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/support/paths.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/planning/schedule_table.hpp"

namespace ninfer {
namespace fs = std::filesystem;

std::string ScheduleDevice::describe() const {
  return fmt::format("{} ({} SMs), driver {}, plugin {} {}", name, sm_count, driver_version, plugin, plugin_version);
}

ScheduleDevice schedule_device(const LoadedPlugin& plugin, const ninfer_device_info& device) {
  static const int driver = discover_devices().driver_version;
  return {device.name, device.sm_count, device.kind == NINFER_DEVICE_CUDA ? driver : 0, plugin.name(),
          plugin.abi->version ? plugin.abi->version : ""};
}

fs::path tuned_table_path(const LoadedPlugin& plugin, const ninfer_device_info& device) {
  std::string card;
  for (char c : std::string(device.name)) card += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  return cache_root() / "schedules" / fmt::format("{}-{}-{}sm.yaml", plugin.name(), card, device.sm_count);
}

void save_schedule_table(const ScheduleTable& table, const fs::path& file) {
  YAML::Emitter y;
  y << YAML::BeginMap << YAML::Key << "format" << YAML::Value << "ninfer-schedule/1";
  y << YAML::Key << "arch" << YAML::Value << table.arch;
  if (table.device) {
    const ScheduleDevice& d = *table.device;
    y << YAML::Key << "device" << YAML::Value << YAML::BeginMap;
    y << YAML::Key << "name" << YAML::Value << d.name << YAML::Key << "sm_count" << YAML::Value << d.sm_count;
    y << YAML::Key << "driver_version" << YAML::Value << d.driver_version;
    y << YAML::Key << "plugin" << YAML::Value << d.plugin << YAML::Key << "plugin_version" << YAML::Value
      << d.plugin_version << YAML::EndMap;
  }
  y << YAML::Key << "entries" << YAML::Value << YAML::BeginSeq;
  for (const ScheduleEntry& e : table.entries) {
    y << YAML::Flow << YAML::BeginMap << YAML::Key << "op" << YAML::Value << e.op;
    y << YAML::Key << "tokens" << YAML::Value << YAML::Flow << YAML::BeginSeq << e.tokens_min << e.tokens_max
      << YAML::EndSeq;
    y << YAML::Key << "variant" << YAML::Value << e.variant;
    if (e.max_ctas) y << YAML::Key << "max_ctas" << YAML::Value << *e.max_ctas;
    if (!e.dims.empty()) {
      y << YAML::Key << "dims" << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (const auto& [lo, hi] : e.dims) y << YAML::Flow << YAML::BeginSeq << lo << hi << YAML::EndSeq;
      y << YAML::EndSeq;
    }
    if (!e.dtypes.empty()) {
      y << YAML::Key << "dtypes" << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (int32_t d : e.dtypes) y << ninfer_dtype_name(d);
      y << YAML::EndSeq;
    }
    y << YAML::EndMap;
  }
  y << YAML::EndSeq << YAML::EndMap;

  fs::create_directories(file.parent_path());
  const fs::path tmp = file.parent_path() / fmt::format(".{}.tmp-{}", file.filename().string(), ::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "# Written by ninfer-tune; measured on " << (table.device ? table.device->describe() : "?") << "\n"
        << y.c_str() << "\n";
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw Error(fmt::format("cannot write {}", tmp.string()));
    }
  }
  if (std::FILE* f = std::fopen(tmp.c_str(), "r")) { // reach the disk before the rename makes it visible
    ::fsync(::fileno(f));
    std::fclose(f);
  }
  std::error_code ec;
  fs::rename(tmp, file, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error(fmt::format("cannot move the schedule table into place at {}: {}", file.string(), ec.message()));
  }
}

ScheduleTable default_schedule_table(const LoadedPlugin& plugin, const ninfer_device_info& device) {
  if (device.described) return builtin_schedule_table(plugin, device);
  const fs::path file = tuned_table_path(plugin, device);
  std::error_code ec;
  if (!fs::exists(file, ec)) return builtin_schedule_table(plugin, device);
  try {
    ScheduleTable t = load_schedule_table(file, data_dir() / "schemas");
    t.source = file.string();
    const ScheduleDevice here = schedule_device(plugin, device);
    if (!t.device) throw Error("it has no device block (it was not written by ninfer-tune)");
    if (!(*t.device == here))
      throw Error(fmt::format("it was measured on {}, this is {}; run ninfer-tune again", t.device->describe(),
                              here.describe()));
    check_against(t, plugin, device);
    spdlog::info("{}: using the tuned schedule table {} ({} entries)", device.name, file.string(), t.entries.size());
    return t;
  } catch (const Error& e) {
    spdlog::warn("{}: tuned schedule table {} refused: {}; using the built-in table", device.name, file.string(),
                 e.what());
  }
  return builtin_schedule_table(plugin, device);
}

} // namespace ninfer
