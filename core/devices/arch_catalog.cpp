#include "ninfer/devices/arch_catalog.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "ninfer/support/error.hpp"
#include "ninfer/support/paths.hpp"
#include "ninfer/support/yaml_schema.hpp"

namespace ninfer {
namespace {

std::string normalise(std::string_view s) {
  std::string out;
  for (char c : s) out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  for (const char* prefix : {"nvidia geforce ", "nvidia "})
    if (out.rfind(prefix, 0) == 0) out.erase(0, std::strlen(prefix));
  return out;
}

template <typename T>
T get(const YAML::Node& n, const char* key, T fallback) {
  return n[key] ? n[key].as<T>() : fallback;
}

} // namespace

ArchCatalog ArchCatalog::load(const std::filesystem::path& dir,
                              const std::filesystem::path& schema_dir) {
  ArchCatalog cat;
  const auto archs_file = dir / "archs.yaml";
  YAML::Node archs = load_validated_yaml(archs_file, schema_dir / "archs.schema.json");
  for (const auto& kv : archs["architectures"]) {
    const YAML::Node& a = kv.second;
    ArchLimits l;
    l.name = kv.first.as<std::string>();
    l.cc_major = a["compute_capability"][0].as<int>();
    l.cc_minor = a["compute_capability"][1].as<int>();
    l.arch_specific = get<bool>(a, "arch_specific", false);
    if (a["features"])
      for (const auto& f : a["features"]) l.features.push_back(f.as<std::string>());
    l.regs_per_sm = a["registers_per_sm"].as<int>();
    l.regs_per_block = a["max_registers_per_block"].as<int>();
    l.max_regs_per_thread = a["max_registers_per_thread"].as<int>();
    l.smem_per_sm = a["shared_memory_per_sm"].as<int64_t>();
    l.smem_per_block = a["shared_memory_per_block"].as<int64_t>();
    l.smem_per_block_optin = a["max_shared_memory_per_block_optin"].as<int64_t>();
    l.reserved_smem_per_block = a["reserved_shared_memory_per_block"].as<int64_t>();
    l.max_threads_per_sm = a["max_threads_per_sm"].as<int>();
    l.max_threads_per_block = a["max_threads_per_block"].as<int>();
    l.max_blocks_per_sm = a["max_blocks_per_sm"].as<int>();
    l.warp_size = a["warp_size"].as<int>();
    cat.archs_.push_back(std::move(l));
  }
  const auto devices_file = dir / "devices.yaml";
  YAML::Node devs = load_validated_yaml(devices_file, schema_dir / "devices.schema.json");
  for (const auto& d : devs["devices"]) {
    KnownDevice k;
    k.name = d["name"].as<std::string>();
    if (d["aliases"])
      for (const auto& a : d["aliases"]) k.aliases.push_back(a.as<std::string>());
    k.arch = d["arch"].as<std::string>();
    k.sm_count = d["sm_count"].as<int>();
    k.memory_gib = d["memory_gib"].as<double>();
    k.l2_mib = get<double>(d, "l2_mib", 0);
    k.bandwidth_gbs = get<double>(d, "bandwidth_gbs", 0);
    if (!cat.find_arch(k.arch))
      throw Error(fmt::format("{}: devices.{}: arch '{}' is not defined in {}",
                              where(devices_file.string(), d["arch"]), k.name, k.arch,
                              archs_file.string()));
    if (cat.find_device(k.name))
      throw Error(fmt::format("{}: device '{}' is listed twice", where(devices_file.string(), d),
                              k.name));
    cat.devices_.push_back(std::move(k));
  }
  return cat;
}

ArchCatalog ArchCatalog::load_default() {
  return load(data_dir() / "arch", data_dir() / "schemas");
}

const ArchLimits* ArchCatalog::find_arch(std::string_view name) const {
  for (const auto& a : archs_)
    if (a.name == name) return &a;
  return nullptr;
}

const KnownDevice* ArchCatalog::find_device(std::string_view name) const {
  const std::string want = normalise(name);
  for (const auto& d : devices_) {
    if (normalise(d.name) == want) return &d;
    for (const auto& a : d.aliases)
      if (normalise(a) == want) return &d;
  }
  return nullptr;
}

const KnownDevice& ArchCatalog::require_device(std::string_view name) const {
  if (const KnownDevice* d = find_device(name)) return *d;
  std::string known;
  for (const auto& d : devices_) known += (known.empty() ? "" : ", ") + d.name;
  throw Error(fmt::format("unknown device model '{}'; known models: {} (add one to arch/devices.yaml)",
                          name, known));
}

ninfer_device_info ArchCatalog::describe(const KnownDevice& d) const {
  const ArchLimits& a = *find_arch(d.arch);
  ninfer_device_info info{};
  info.kind = NINFER_DEVICE_CUDA;
  info.ordinal = -1;
  info.described = 1;
  std::snprintf(info.name, sizeof info.name, "%s", d.name.c_str());
  std::snprintf(info.arch, sizeof info.arch, "%s", a.name.c_str());
  info.cc_major = a.cc_major;
  info.cc_minor = a.cc_minor;
  info.sm_count = d.sm_count;
  info.regs_per_sm = a.regs_per_sm;
  info.regs_per_block = a.regs_per_block;
  info.max_regs_per_thread = a.max_regs_per_thread;
  info.smem_per_sm = a.smem_per_sm;
  info.smem_per_block = a.smem_per_block;
  info.smem_per_block_optin = a.smem_per_block_optin;
  info.reserved_smem_per_block = a.reserved_smem_per_block;
  info.max_threads_per_sm = a.max_threads_per_sm;
  info.max_threads_per_block = a.max_threads_per_block;
  info.max_blocks_per_sm = a.max_blocks_per_sm;
  info.warp_size = a.warp_size;
  info.cooperative_launch = 1;
  info.l2_bytes = static_cast<int64_t>(d.l2_mib * 1024 * 1024);
  info.memory_bytes = static_cast<int64_t>(d.memory_gib * 1024 * 1024 * 1024);
  info.memory_bandwidth_gbs = d.bandwidth_gbs;
  return info;
}

} // namespace ninfer
