// The op calls' side of ninfer/models/linear_observer.hpp: whether a backend's projections are
// observed, and the report of one call's input rows.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "ninfer/models/linear_observer.hpp"

namespace ninfer::models {

// The observer installed for `be`, or null (the common case costs one atomic load).
LinearObserver* linear_observer(const Backend& be);

// Copies `tokens` rows of `cols` floats, `stride` apart from `rows` (backend memory), to the host
// and passes them to the observer, if it wants `modules`. Nothing while the backend only sizes
// its workspace; an error while it records.
void report_linear_input(Backend& be, LinearObserver& observer, std::span<const std::string> modules,
                         const float* rows, int64_t stride, int64_t tokens, int64_t cols);

} // namespace ninfer::models
