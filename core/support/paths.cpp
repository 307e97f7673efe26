#include "ninfer/support/paths.hpp"

#include <dlfcn.h>

#include <cstdlib>

namespace ninfer {

std::filesystem::path core_library_dir() {
  Dl_info info{};
  // Any symbol of this library resolves to the library file itself.
  if (dladdr(reinterpret_cast<void*>(&core_library_dir), &info) != 0 && info.dli_fname)
    return std::filesystem::canonical(info.dli_fname).parent_path();
  return std::filesystem::current_path();
}

std::filesystem::path default_plugin_dir() {
  if (const char* env = std::getenv("NINFER_PLUGIN_DIR"); env && *env) return env;
  return core_library_dir() / "ninfer" / "plugins";
}

std::filesystem::path data_dir() {
  if (const char* env = std::getenv("NINFER_DATA_DIR"); env && *env) return env;
  return core_library_dir().parent_path() / "share" / "ninfer";
}

std::filesystem::path cache_root() {
  if (const char* env = std::getenv("NINFER_CACHE_DIR"); env && *env) return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::filesystem::path(xdg) / "ninfer";
  if (const char* home = std::getenv("HOME"); home && *home) return std::filesystem::path(home) / ".cache" / "ninfer";
  return std::filesystem::temp_directory_path() / "ninfer-cache";
}

} // namespace ninfer
