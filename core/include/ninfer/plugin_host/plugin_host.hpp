// Loads architecture plugins (shared libraries exporting `ninfer_plugin_entry`) from a
// directory with Boost.DLL, collects the variants each registers, and picks the best-scoring
// plugin for a device. A plugin that fails to load, lacks the entry point, or speaks another
// ABI version is skipped with a one-line problem naming its file; the others keep working.
// Loaded libraries are never unloaded: variant structs and strings they hand out must stay
// valid for the life of the process.
//
// A fallback plugin (NINFER_CAP_FALLBACK: cuda-generic, which compiles its kernels while it
// registers, ~30 s on a machine's first start) is loaded but registered only when it is needed:
// when find() names it, when choose() is forced to it, or when no other plugin scores above zero
// for the device. On a card with an exact plugin it then costs nothing.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "ninfer/abi/plugin_abi.h"

namespace ninfer {

struct LoadedPlugin {
  std::filesystem::path file;
  const ninfer_plugin* abi = nullptr;
  std::vector<const ninfer_variant*> variants;
  bool deferred = false; // a fallback not registered yet (no variants until it is)
  bool failed = false;   // its deferred registration failed (a problem names why); never chosen

  std::string name() const { return abi->name; }
  std::string arch() const { return abi->target_arch; }
  bool fallback() const { return (abi->capabilities & NINFER_CAP_FALLBACK) != 0; }
  std::vector<const ninfer_variant*> variants_for(std::string_view op) const;
  const ninfer_variant* find_variant(std::string_view op, std::string_view name) const;
  std::vector<std::string> ops() const;

  // The registered variant `name` of `op`; else one the plugin makes on demand for `device`
  // (ninfer_plugin::make_variant: compiled for the live card, kept for the process); else
  // nullptr, with the plugin's reason in `why_unknown` when it gave one. Throws ninfer::Error
  // with the plugin's reason when the variant exists but cannot be made here (a described card,
  // no NVRTC, a compile error).
  const ninfer_variant* resolve_variant(const ninfer_device_info& device, std::string_view op, std::string_view name,
                                        std::string* why_unknown = nullptr) const;
  // The on-demand variant names the plugin offers ninfer-tune for `op` at a bucket of `tokens`.
  std::vector<std::string> sweep_variant_names(std::string_view op, int64_t tokens) const;
};

struct PluginProblem {
  std::filesystem::path file;
  std::string message;
};

struct PluginScore {
  const LoadedPlugin* plugin;
  int score;
  std::string reason;
};

struct PluginChoice {
  const LoadedPlugin* chosen = nullptr; // null: nothing may run on this device
  std::vector<PluginScore> scores;      // every loaded plugin, best first
};

class PluginHost {
 public:
  // Loads every *.so in `dir`. Throws ninfer::Error if the directory does not exist.
  void load_directory(const std::filesystem::path& dir);
  // Loads one library; returns false (and records a problem) when it is not a usable plugin.
  bool load_file(const std::filesystem::path& file);

  // Every plugin loaded, deferred fallbacks included.
  const std::vector<std::unique_ptr<LoadedPlugin>>& plugins() const { return plugins_; }
  const std::vector<PluginProblem>& problems() const { return problems_; }
  // The plugin named `name`, a deferred fallback registered first; null when there is none or
  // its registration failed.
  const LoadedPlugin* find(std::string_view name) const;

  // Scores every plugin for `device`; `forced` (a plugin name) restricts the choice to that
  // plugin, which still must score above zero. Deferred fallbacks are registered and scored only
  // when forced or when no other plugin scores above zero; otherwise their score is 0, with why.
  PluginChoice choose(const ninfer_device_info& device, std::string_view forced = {}) const;

 private:
  // Registers p's variants; false (and a problem recorded, p marked failed) when that fails.
  bool register_variants(LoadedPlugin& p) const;
  // Registers p if it is still deferred; false when its registration failed. The caller holds
  // deferred_mutex_.
  bool register_deferred(LoadedPlugin& p) const;

  std::vector<std::unique_ptr<LoadedPlugin>> plugins_;
  mutable std::vector<PluginProblem> problems_; // deferred registrations add theirs later
  // Held by find() and choose(), which may register a deferred fallback (and so change its
  // state and the problems); loading is not meant to race with them.
  mutable std::mutex deferred_mutex_;
};

} // namespace ninfer
