// A kernel for the ordering tests (ordering_test.cpp): it lets the next kernel on the stream
// launch at once, then waits, then copies. An op launched after it with programmatic dependent
// launch that reads, before its launch wait, any byte this kernel writes sees the old value.
#pragma once

#include <cstdint>

namespace ninfer::test {

struct LateRange {
  const void* src;
  void* dst;
  int64_t bytes;
};
struct LateCopies {
  static constexpr int kMax = 16;
  LateRange range[kMax];
  int count = 0;
};

// Enqueues the copies on `stream` (a cudaStream_t) behind a wait of `delay_ns`; returns the
// launch's cudaError_t as an int (0: success).
int launch_late_copy(void* stream, const LateCopies& copies, long long delay_ns);

} // namespace ninfer::test
