#pragma once
// A server's warm-up: prompt passes at the token counts whose first use costs host time.
#include <cstdint>
#include <vector>

namespace ninfer {
class CausalLM;
}

namespace ninfer::serving {

// The counts a warm-up runs: every row bucket's top (ninfer/abi/row_buckets.h) up to
// `most_tokens` (at most NINFER_ROW_BUCKET_MOST), and that limit itself, ascending.
std::vector<int64_t> warm_up_counts(int64_t most_tokens);

struct WarmUp {
  int64_t passes = 0;
  int64_t tokens = 0; // over all passes
  double seconds = 0;
};

// One prompt pass of each warm_up_counts(most_tokens) count in `slot`, which must be empty and
// is left empty (its KV blocks given back): a library's algorithm pick for a row count and a
// kernel's first launch then happen here, not in a request's prompt chunk. Before an Engine
// takes the model: nothing else may use it meanwhile.
WarmUp warm_up(CausalLM& lm, int32_t slot, int64_t most_tokens);

} // namespace ninfer::serving
