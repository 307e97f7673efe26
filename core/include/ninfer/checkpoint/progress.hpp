// A one-line progress indicator on stderr, shown only when stderr is a terminal (logs and
// pipes stay clean). Loading code reports "done of total" with a short detail; the line is
// redrawn in place at most ~10 times a second and erased when finished.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ninfer {

class ProgressLine {
 public:
  ProgressLine(std::string what, int64_t total);
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  ~ProgressLine(); // calls finish()

  void update(int64_t done, const std::string& detail = "");
  void finish(); // erases the line
  bool active() const { return active_; }

  // Whether stderr is a terminal (the indicator's only condition).
  static bool stderr_is_terminal();

 private:
  std::string what_;
  int64_t total_;
  bool active_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_{};
};

} // namespace ninfer
