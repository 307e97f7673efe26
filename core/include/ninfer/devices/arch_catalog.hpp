// What ninfer knows about GPU architectures and cards without owning them: per-architecture
// limits (arch/archs.yaml) and a table of known cards (arch/devices.yaml), both validated by
// schemas in schemas/. A known card plus its architecture's limits is a full device
// description the planner can plan against.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "ninfer/abi/device_info.h"

namespace ninfer {

struct ArchLimits {
  std::string name; // "sm_90"
  int cc_major = 0;
  int cc_minor = 0;
  bool arch_specific = false; // an `a` target: code runs on exactly this compute capability
  std::vector<std::string> features;
  int regs_per_sm = 0;
  int regs_per_block = 0;
  int max_regs_per_thread = 0;
  int64_t smem_per_sm = 0;
  int64_t smem_per_block = 0;
  int64_t smem_per_block_optin = 0;
  int64_t reserved_smem_per_block = 0;
  int max_threads_per_sm = 0;
  int max_threads_per_block = 0;
  int max_blocks_per_sm = 0;
  int warp_size = 0;
};

struct KnownDevice {
  std::string name;
  std::vector<std::string> aliases; // e.g. the name the driver reports
  std::string arch;
  int sm_count = 0;
  double memory_gib = 0;
  double l2_mib = 0;
  double bandwidth_gbs = 0;
};

class ArchCatalog {
 public:
  // Loads DIR/archs.yaml and DIR/devices.yaml, validated against SCHEMA_DIR. Throws
  // ninfer::Error naming file, line and key on any problem, including a device whose arch
  // is not in archs.yaml.
  static ArchCatalog load(const std::filesystem::path& dir, const std::filesystem::path& schema_dir);
  // The installed catalog (data_dir()/arch, data_dir()/schemas).
  static ArchCatalog load_default();

  const std::vector<ArchLimits>& archs() const { return archs_; }
  const std::vector<KnownDevice>& devices() const { return devices_; }
  const ArchLimits* find_arch(std::string_view name) const;
  // Matches the name or an alias, ignoring case and a leading "NVIDIA "/"NVIDIA GeForce ".
  const KnownDevice* find_device(std::string_view name) const;
  // Like find_device, but throws an Error that lists the known names.
  const KnownDevice& require_device(std::string_view name) const;

  ninfer_device_info describe(const KnownDevice& d) const;

 private:
  std::vector<ArchLimits> archs_;
  std::vector<KnownDevice> devices_;
};

} // namespace ninfer
