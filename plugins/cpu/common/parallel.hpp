// A small persistent thread pool for the CPU plugin's heavier ops (linear, attention, the
// gated delta rule). Work is split by output rows or heads, never inside one sum, so results
// are bit-identical for any thread count. NINFER_CPU_THREADS sets the thread count (default:
// the hardware's); 1 runs everything on the calling thread.
#pragma once

#include <cstdint>
#include <functional>

namespace ninfer::cpu_plugin {

// Calls fn(begin, end) over [0, n) in chunks of at least `grain` items, in parallel.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// As parallel_for, and tells fn which worker runs the chunk (0 <= worker < thread_count()), so
// an op can give each worker its own slice of the caller's workspace.
void parallel_for_workers(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn);

int thread_count();

} // namespace ninfer::cpu_plugin
