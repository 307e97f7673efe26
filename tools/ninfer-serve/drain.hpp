// Graceful shutdown's bookkeeping: how many generation requests are in flight, and whether
// new ones are still taken. Stopping the HTTP server closes every connection, so the server
// first drains (new requests and /health get 503, running ones finish) and only then stops.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

namespace ninfer::tools {

class Drain {
 public:
  // A token held for as long as a request is in flight (a stream: until its last byte is
  // written); null once draining has started.
  std::shared_ptr<void> enter() {
    std::lock_guard lock(mutex_);
    if (draining_) return nullptr;
    ++in_flight_;
    return std::shared_ptr<void>(this, [](void* self) { static_cast<Drain*>(self)->leave(); });
  }
  bool draining() {
    std::lock_guard lock(mutex_);
    return draining_;
  }
  void start() {
    std::lock_guard lock(mutex_);
    draining_ = true;
  }
  // True once nothing is in flight; false after `timeout`.
  bool wait_idle(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return in_flight_ == 0; });
  }

 private:
  void leave() {
    {
      std::lock_guard lock(mutex_);
      --in_flight_;
    }
    cv_.notify_all();
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  long in_flight_ = 0;
  bool draining_ = false;
};

} // namespace ninfer::tools
