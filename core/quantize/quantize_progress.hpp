// Progress of a quantization on stderr: "tensor i of n, bytes, ETA". Redrawn in place at most
// ten times a second on a terminal; a plain line every ten seconds otherwise (logs stay short).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ninfer::quantize_detail {

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
