// GET /metrics: Prometheus text exposition of what the server has done and holds now —
// requests by finish reason, prompt and generated tokens, queue depth, slots in use, the KV
// cache and GDN state memory, recent generation speed, and the engine loop's counters (steps,
// rows, logits rows brought to the host).
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "ninfer/runtime/backend.hpp"
#include "ninfer/serving/engine.hpp"

namespace ninfer::tools {

class ServerMetrics {
 public:
  // Records a finished request (the engine's on_finish).
  void record(const serving::ServeResult& r);
  // The exposition text.
  std::string render(const serving::Engine& engine, const Backend& backend) const;

 private:
  using Clock = std::chrono::steady_clock;
  mutable std::mutex mu_;
  std::map<std::string, int64_t> requests_; // by finish reason
  int64_t prompt_tokens_ = 0, generated_tokens_ = 0;
  int64_t cache_hits_ = 0, cached_tokens_ = 0; // requests that reused a slot's tokens, and how many
  double decode_seconds_ = 0;
  std::deque<std::pair<Clock::time_point, int64_t>> recent_; // (finish time, tokens) of the last minute
};

} // namespace ninfer::tools
