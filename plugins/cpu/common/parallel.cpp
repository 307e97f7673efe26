#include "common/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace ninfer::cpu_plugin {
namespace {

int configured_threads() {
  if (const char* s = std::getenv("NINFER_CPU_THREADS"); s && *s) {
    const int n = std::atoi(s);
    if (n >= 1) return std::min(n, 256);
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

class Pool {
 public:
  explicit Pool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work_loop(i); });
  }
  // Never destroyed (the plugin is never unloaded); workers park on the condition variable.

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void run(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t, int)>& fn) {
    std::lock_guard<std::mutex> serial(run_mutex_); // one parallel region at a time
    {
      std::lock_guard<std::mutex> lk(m_);
      fn_ = &fn;
      n_ = n;
      chunk_ = chunk;
      next_.store(0);
      busy_ = static_cast<int>(workers_.size());
      ++generation_;
    }
    cv_.notify_all();
    drain(0);
    std::unique_lock<std::mutex> lk(m_);
    done_cv_.wait(lk, [&] { return busy_ == 0; });
    fn_ = nullptr;
  }

 private:
  void drain(int worker) {
    for (;;) {
      const int64_t b = next_.fetch_add(chunk_);
      if (b >= n_) return;
      (*fn_)(b, std::min(n_, b + chunk_), worker);
    }
  }

  void work_loop(int worker) {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(m_);
        cv_.wait(lk, [&] { return generation_ != seen; });
        seen = generation_;
      }
      drain(worker);
      {
        std::lock_guard<std::mutex> lk(m_);
        --busy_;
      }
      done_cv_.notify_one();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex run_mutex_, m_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int64_t, int64_t, int)>* fn_ = nullptr;
  int64_t n_ = 0, chunk_ = 1;
  std::atomic<int64_t> next_{0};
  int busy_ = 0;
  uint64_t generation_ = 0;
};

Pool& pool() {
  static Pool* p = new Pool(configured_threads());
  return *p;
}

} // namespace

int thread_count() { return pool().size(); }

void parallel_for_workers(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  Pool& p = pool();
  if (p.size() == 1 || n <= grain) {
    fn(0, n, 0);
    return;
  }
  // About four chunks per thread balance uneven rows without much scheduling overhead.
  const int64_t chunk = std::max(grain, (n + 4 * p.size() - 1) / (4 * p.size()));
  p.run(n, chunk, fn);
}

} // namespace ninfer::cpu_plugin

namespace ninfer::cpu_plugin {

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  parallel_for_workers(n, grain, [&](int64_t b, int64_t e, int) { fn(b, e); });
}

} // namespace ninfer::cpu_plugin
