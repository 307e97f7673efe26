#include "ninfer/serving/warm_up.hpp"

#include <algorithm>
#include <chrono>

#include "ninfer/abi/row_buckets.h"
#include "ninfer/models/causal_lm.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer::serving {

std::vector<int64_t> warm_up_counts(int64_t most_tokens) {
  // A library call takes at most NINFER_ROW_BUCKET_MOST rows; a longer pass meets the buckets
  // of its pieces, which the counts below already hold.
  const int64_t most = std::min<int64_t>(most_tokens, NINFER_ROW_BUCKET_MOST);
  std::vector<int64_t> counts;
  for (int64_t n = 1; n <= most; n = ninfer_row_bucket(n + 1)) counts.push_back(n);
  if (most >= 1 && counts.back() != most) counts.push_back(most);
  return counts;
}

WarmUp warm_up(CausalLM& lm, int32_t slot, int64_t most_tokens) {
  if (lm.position(slot) != 0 || lm.kv_blocks_held(slot) != 0)
    throw Error("warm-up: its slot must be empty");
  const auto t0 = std::chrono::steady_clock::now();
  WarmUp w;
  std::vector<int32_t> ids;
  for (const int64_t n : warm_up_counts(most_tokens)) {
    // Token ids spread over the vocabulary: an embedding row each, nothing the pass depends on.
    ids.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919) % lm.vocab_size());
    lm.prefill(slot, ids); // waits for the pass's logits
    lm.release_kv(slot);
    ++w.passes;
    w.tokens += n;
  }
  w.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return w;
}

} // namespace ninfer::serving
