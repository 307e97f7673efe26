// The arch catalog's described cards and this build's plugins for them, loaded once: what the
// planning tests (foundation, gpu, gpu_ops) iterate over. Planning needs no GPU.
#pragma once

#include <string>
#include <vector>

#include "ninfer/devices/arch_catalog.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "test_support.hpp"

namespace ninfer::test {

inline const ArchCatalog& catalog() {
  static ArchCatalog* cat = new ArchCatalog(ArchCatalog::load(data_dir() / "arch", data_dir() / "schemas"));
  return *cat;
}

// cuda-generic and its kind: built for a virtual architecture ("compute_80"), resources read on
// the live GPU, so they describe no card of the catalog and have their own tests.
inline bool is_generic_plugin(const LoadedPlugin& p) { return p.arch().rfind("compute_", 0) == 0; }

// The exact-architecture CUDA plugins of this build (empty in a build without CUDA).
inline std::vector<const LoadedPlugin*> cuda_plugins() {
  std::vector<const LoadedPlugin*> out;
  for (const auto& p : build_plugins().plugins())
    if (p->arch() != "cpu" && !is_generic_plugin(*p)) out.push_back(p.get());
  return out;
}

// The plugin built for a described device's architecture, or nullptr.
inline const LoadedPlugin* plugin_for_arch(const std::string& arch) {
  for (const auto* p : cuda_plugins())
    if (p->arch() == arch) return p;
  return nullptr;
}

// A described card (arch/devices.yaml) with the plugin this build has for its architecture.
struct Card {
  ninfer_device_info dev;
  const LoadedPlugin* plugin;
};

// Every described card this build has a plugin for (empty in a build without CUDA).
inline std::vector<Card> cards_with_plugins() {
  std::vector<Card> out;
  for (const auto& k : catalog().devices())
    if (const LoadedPlugin* p = plugin_for_arch(k.arch)) out.push_back({catalog().describe(k), p});
  return out;
}

} // namespace ninfer::test
