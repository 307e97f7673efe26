#include "ninfer/support/row_threads.hpp"

#include <algorithm>
#include <thread>
#include <vector>

#include "ninfer/support/error.hpp"

namespace ninfer {

int64_t threads_for(int64_t items, double cost_per_item) {
  const int64_t cores = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 32);
  // About a million operations per thread pays for starting it.
  const auto worth = static_cast<int64_t>(static_cast<double>(items) * cost_per_item / (1 << 20));
  return std::clamp<int64_t>(std::min(cores, worth), 1, std::max<int64_t>(1, items));
}

void for_ranges(int64_t items, int64_t threads, const std::function<std::string(int64_t, int64_t)>& body) {
  threads = std::clamp<int64_t>(threads, 1, std::max<int64_t>(1, items));
  std::vector<std::string> problems(static_cast<size_t>(threads));
  if (threads == 1) {
    problems[0] = body(0, items);
  } else {
    std::vector<std::thread> pool;
    for (int64_t t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { problems[static_cast<size_t>(t)] = body(items * t / threads, items * (t + 1) / threads); });
    for (auto& th : pool) th.join();
  }
  for (const auto& p : problems)
    if (!p.empty()) throw Error(p);
}

} // namespace ninfer
