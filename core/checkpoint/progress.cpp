#include "ninfer/checkpoint/progress.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <cstdio>

namespace ninfer {

bool ProgressLine::stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

ProgressLine::ProgressLine(std::string what, int64_t total)
    : what_(std::move(what)), total_(total), active_(stderr_is_terminal()) {}

ProgressLine::~ProgressLine() { finish(); }

void ProgressLine::update(int64_t done, const std::string& detail) {
  if (!active_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && done < total_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  drawn_ = true;
  const int pct = total_ > 0 ? static_cast<int>(100 * done / total_) : 100;
  // \r + "erase line" redraws in place; the detail is clipped so the line never wraps.
  std::string line = fmt::format("{}: {}/{} ({}%) {}", what_, done, total_, pct, detail);
  if (line.size() > 100) line = line.substr(0, 97) + "...";
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
}

void ProgressLine::finish() {
  if (active_ && drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
  drawn_ = false;
  active_ = false;
}

} // namespace ninfer
