#include "quantize_progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace ninfer::quantize_detail {

std::string format_duration(double s) {
  if (s < 60) return fmt::format("{:.0f}s", s);
  if (s < 3600) return fmt::format("{}m{:02d}s", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  return fmt::format("{}h{:02d}m", static_cast<int>(s) / 3600, static_cast<int>(s) % 3600 / 60);
}

std::string format_bytes(uint64_t b) {
  if (b >= 1'000'000'000) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1'000'000) return fmt::format("{:.1f} MB", b / 1e6);
  return fmt::format("{:.1f} kB", b / 1e3);
}

namespace {
std::string duration(double s) { return format_duration(s); }
std::string size(uint64_t b) { return format_bytes(b); }
} // namespace

void progress_note(bool enabled, const std::string& line) {
  if (!enabled) return;
  fmt::print(stderr, "{}\n", line);
  std::fflush(stderr);
}

ProgressLine::ProgressLine(bool enabled)
    : enabled_(enabled), tty_(::isatty(STDERR_FILENO) == 1), start_(std::chrono::steady_clock::now()), last_(start_) {}

ProgressLine::~ProgressLine() { finish(); }

bool ProgressLine::is_due(bool last, double* elapsed) {
  if (!enabled_) return false;
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_).count();
  if (since < (tty_ ? 0.1 : 10.0) && !last) return false;
  last_ = now;
  *elapsed = std::chrono::duration<double>(now - start_).count();
  return true;
}

void ProgressLine::draw(const std::string& line) {
  if (tty_) {
    fmt::print(stderr, "\r\033[K{}", line.substr(0, 160));
    drawn_ = true;
  } else {
    fmt::print(stderr, "{}\n", line);
  }
  std::fflush(stderr);
}

void ProgressLine::finish() {
  if (drawn_) fmt::print(stderr, "\r\033[K");
  drawn_ = false;
}

CountProgress::CountProgress(bool enabled, std::string label, size_t total)
    : line_(enabled), label_(std::move(label)), total_(total) {}

void CountProgress::update(size_t done, const std::string& detail) {
  double elapsed = 0;
  if (!line_.is_due(done >= total_, &elapsed)) return;
  const std::string eta = done > 0 && done < total_
                              ? ", ETA " + duration(elapsed * static_cast<double>(total_ - done) / static_cast<double>(done))
                              : "";
  line_.draw(fmt::format("{} {} of {}{}  {}", label_, done, total_, eta, detail));
}

QuantizeProgress::QuantizeProgress(bool enabled, size_t tensors, uint64_t bytes)
    : line_(enabled), tensors_(tensors), bytes_(bytes) {}

void QuantizeProgress::update(size_t tensors_done, uint64_t bytes_done, const std::string& current) {
  double elapsed = 0;
  if (!line_.is_due(tensors_done >= tensors_, &elapsed)) return;
  const std::string eta = bytes_done > 0 && bytes_done < bytes_
                              ? ", ETA " + duration(elapsed * static_cast<double>(bytes_ - bytes_done) /
                                                    static_cast<double>(bytes_done))
                              : "";
  line_.draw(fmt::format("quantizing: tensor {} of {}, {} of {}{}  {}", tensors_done, tensors_, size(bytes_done),
                         size(bytes_), eta, current));
}

} // namespace ninfer::quantize_detail
