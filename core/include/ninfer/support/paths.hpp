// Where ninfer finds its plugins and data. Everything is relative to the core library's own
// location so an installed tree can be copied anywhere (bin/, lib/, lib/ninfer/plugins/,
// share/ninfer/); environment variables override for development and tests.
#pragma once

#include <filesystem>

namespace ninfer {

// Directory holding libninfer_core.so.
std::filesystem::path core_library_dir();
// $NINFER_PLUGIN_DIR, else <core lib dir>/ninfer/plugins.
std::filesystem::path default_plugin_dir();
// $NINFER_DATA_DIR, else <core lib dir>/../share/ninfer (holds arch/ and schemas/).
std::filesystem::path data_dir();
// Where ninfer keeps what it measures or builds on this machine (tuned schedule tables, compiled
// kernels): $NINFER_CACHE_DIR, else $XDG_CACHE_HOME/ninfer, else $HOME/.cache/ninfer. Not created.
std::filesystem::path cache_root();

} // namespace ninfer
