// Progress of a quantization on stderr: "tensor i of n, bytes, ETA". Redrawn in place at most
// ten times a second on a terminal; a plain line every ten seconds otherwise (logs stay short).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

namespace ninfer::quantize_detail {

// "LABEL: i of n, ETA  DETAIL" for the calibration passes and GPTQ's solves, same pacing.
class CountProgress {
 public:
  CountProgress(bool enabled, std::string label, size_t total);
  ~CountProgress();
  void update(size_t done, const std::string& detail);
  void finish();

 private:
  bool enabled_;
  bool tty_;
  bool drawn_ = false;
  std::string label_;
  size_t total_;
  std::chrono::steady_clock::time_point start_, last_;
};

// A plain line on stderr (the stage's plan and figures), unless disabled.
void progress_note(bool enabled, const std::string& line);
// "1.2 GB", "35.0 MB", "812.0 kB"; "12s", "3m05s", "1h02m".
std::string format_bytes(uint64_t b);
std::string format_duration(double seconds);

class QuantizeProgress {
 public:
  QuantizeProgress(bool enabled, size_t tensors, uint64_t bytes);
  ~QuantizeProgress();
  void update(size_t tensors_done, uint64_t bytes_done, const std::string& current);
  void finish();

 private:
  bool enabled_;
  bool tty_;
  bool drawn_ = false;
  size_t tensors_;
  uint64_t bytes_;
  std::chrono::steady_clock::time_point start_, last_;
};

} // namespace ninfer::quantize_detail
