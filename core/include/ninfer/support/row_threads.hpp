// Work split over the host's cores by ranges of rows (or any independent items): each range
// returns its first problem instead of throwing, and the first range's problem is thrown, so the
// message does not depend on the thread count; neither do the results, as long as each item's
// arithmetic is its own.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace ninfer {

// Threads for `items` items of `cost_per_item` arithmetic each: at most the host's cores (and
// 32), fewer when the work is small.
int64_t threads_for(int64_t items, double cost_per_item);

// Runs body(begin, end) on contiguous ranges covering [0, items) on `threads` threads and throws
// ninfer::Error with the problem of the first range that had one.
void for_ranges(int64_t items, int64_t threads, const std::function<std::string(int64_t, int64_t)>& body);

} // namespace ninfer
