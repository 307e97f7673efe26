// Shared by the fuzz targets: a scratch folder per process, the source tree's fixtures, and
// the one rule every target checks: a parser may refuse input only with the error type its
// callers turn into a message (anything else escaping is a finding).
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <typeinfo>

namespace ninfer::fuzz {

// A fresh folder for this process (in /dev/shm when there is one: targets that need a file
// write one per input), removed at exit.
inline std::filesystem::path scratch_path() {
  const std::filesystem::path base = std::filesystem::is_directory("/dev/shm") ? std::filesystem::path("/dev/shm")
                                                                               : std::filesystem::temp_directory_path();
  return base / ("ninfer-fuzz-" + std::to_string(::getpid()));
}

inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::filesystem::create_directories(scratch_path());
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_path(), ec);
    });
    return scratch_path();
  }();
  return dir;
}

inline void write_file(const std::filesystem::path& p, const char* data, size_t size) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(data, static_cast<std::streamsize>(size));
}

inline std::filesystem::path source_dir() { return NINFER_FUZZ_SOURCE_DIR; }

// An exception other than the expected one: report it and abort, so libFuzzer (or the replay
// driver) records the input.
[[noreturn]] inline void unexpected(const char* target, const std::exception& e) {
  std::fprintf(stderr, "%s: unexpected exception (%s): %s\n", target, typeid(e).name(), e.what());
  std::abort();
}

} // namespace ninfer::fuzz
