// Files an attacker or a careless user can put where a loader expects a regular file. A FIFO
// blocks a reader in open() until a writer comes, so a loader that opens one without checking
// hangs; `within_seconds` runs the load on another thread and, when it has not finished in
// time, unblocks it (opens the write end and closes it) so the test fails instead of hanging.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <string>

#include "ninfer/support/error.hpp"

namespace ninfer::test {

inline void make_fifo(const std::filesystem::path& p) {
  std::filesystem::create_directories(p.parent_path());
  ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0) << "mkfifo " << p;
}

// The ninfer::Error message `load` throws; a failure when it returns, throws anything else, or
// takes longer than `seconds` (then the FIFO at `fifo`, if any, is unblocked).
inline std::string error_within(double seconds, const std::function<void()>& load,
                                const std::filesystem::path& fifo = {}) {
  auto result = std::async(std::launch::async, [&]() -> std::string {
    try {
      load();
    } catch (const Error& e) {
      return e.what();
    } catch (const std::exception& e) {
      return std::string("(not an ninfer::Error: ") + e.what() + ")";
    }
    return "(no error)";
  });
  if (result.wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready) {
    ADD_FAILURE() << "the load did not finish within " << seconds << " s (blocked on " << fifo << "?)";
    // Unblock a reader stuck in open(), then let it see end-of-file; repeat for a second open.
    for (int i = 0; i < 50 && result.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready; ++i) {
      if (fifo.empty()) continue;
      const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
    }
  }
  return result.get();
}

} // namespace ninfer::test
