// Progress of a quantization on stderr: "tensor i of n, bytes, ETA". Redrawn in place at most
// ten times a second on a terminal; a plain line every ten seconds otherwise (logs stay short).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

namespace ninfer::quantize_detail {

// The pacing and drawing both progress lines share: is_due() says whether a line should be drawn
// now (always for the last item), draw() redraws it in place on a terminal or prints it.
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled);
  ~ProgressLine();
  // Whether to draw now (`last`: the final item, always drawn); the seconds since the start.
  bool is_due(bool last, double* elapsed);
  void draw(const std::string& line);
  void finish();

 private:
  bool enabled_;
  bool tty_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

// "LABEL: i of n, ETA  DETAIL" for the calibration passes and GPTQ's solves, same pacing.
class CountProgress {
 public:
  CountProgress(bool enabled, std::string label, size_t total);
  void update(size_t done, const std::string& detail);
  void finish() { line_.finish(); }

 private:
  ProgressLine line_;
  std::string label_;
  size_t total_;
};

// A plain line on stderr (the stage's plan and figures), unless disabled.
void progress_note(bool enabled, const std::string& line);
// "1.2 GB", "35.0 MB", "812.0 kB"; "12s", "3m05s", "1h02m".
std::string format_bytes(uint64_t b);
std::string format_duration(double seconds);

class QuantizeProgress {
 public:
  QuantizeProgress(bool enabled, size_t tensors, uint64_t bytes);
  void update(size_t tensors_done, uint64_t bytes_done, const std::string& current);
  void finish() { line_.finish(); }

 private:
  ProgressLine line_;
  size_t tensors_;
  uint64_t bytes_;
};

} // namespace ninfer::quantize_detail
