#include "linear_observation.hpp"

#include <fmt/format.h>

#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#include "ninfer/runtime/backend.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer {

namespace {

// Observers are rare (ninfer-quantize, tests): a short list behind a mutex, and a count that lets
// every projection of an unobserved model skip the lookup.
std::mutex g_mutex;
std::vector<std::pair<const Backend*, LinearObserver*>> g_observers;
std::atomic<size_t> g_count{0};

} // namespace

ObservedLinears::ObservedLinears(Backend& backend, LinearObserver& observer) : backend_(backend) {
  std::lock_guard lock(g_mutex);
  for (const auto& [be, obs] : g_observers)
    if (be == &backend) throw Error("the projections of this backend are already observed (one observer at a time)");
  g_observers.emplace_back(&backend, &observer);
  g_count = g_observers.size();
}

ObservedLinears::~ObservedLinears() {
  std::lock_guard lock(g_mutex);
  std::erase_if(g_observers, [&](const auto& e) { return e.first == &backend_; });
  g_count = g_observers.size();
}

namespace models {

LinearObserver* linear_observer(const Backend& be) {
  if (g_count.load(std::memory_order_relaxed) == 0) return nullptr;
  std::lock_guard lock(g_mutex);
  for (const auto& [b, obs] : g_observers)
    if (b == &be) return obs;
  return nullptr;
}

void report_linear_input(Backend& be, LinearObserver& observer, std::span<const std::string> modules,
                         const float* rows, int64_t stride, int64_t tokens, int64_t cols) {
  if (be.sizing() || modules.empty() || tokens <= 0 || !observer.wants(modules)) return;
  if (be.recording())
    throw Error(fmt::format("the input of {} is observed while the backend records its launches, which cannot copy "
                            "rows to the host",
                            modules.front()));
  // One copy of the rows' whole span (their stride may exceed cols), then the columns wanted.
  std::vector<float> span(static_cast<size_t>((tokens - 1) * stride + cols));
  be.download_from(rows, span.data(), span.size() * sizeof(float));
  std::vector<float> packed;
  const float* out = span.data();
  if (stride != cols) {
    packed.resize(static_cast<size_t>(tokens * cols));
    for (int64_t t = 0; t < tokens; ++t)
      std::copy_n(span.data() + t * stride, cols, packed.data() + t * cols);
    out = packed.data();
  }
  observer.observe(LinearInput{modules, out, tokens, cols});
}

} // namespace models
} // namespace ninfer
