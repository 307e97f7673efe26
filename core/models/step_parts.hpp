// The parts a block runs its sequence-following ops over (KV append and attention, the Gated
// DeltaNet conv and delta rule): a mixed step's prompt chunk and its one-token rows, each as a
// step of its own, or any other step whole. Row-wise ops (norms, projections, the MLP) run over
// the whole step, so the weights are read once for both parts; the sequence-following ops of
// each part take the routes they take in a prompt chunk and in a decode step of that size (the
// one-token rows the fused decode kernels, the chunk the prefill forms), so a mixed step
// computes each row as a step of one kind would (docs/serving.md, "The engine loop").
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "step.hpp"

namespace ninfer::models {

struct StepPart {
  int64_t first = 0; // the part's first row in the step
  Step step;         // the part as a step of its own; its rows are the step's from `first` on
};

class StepParts {
 public:
  explicit StepParts(const Step& s) {
    if (s.chunk_tokens == 0) {
      parts_[0] = {0, s};
      count_ = 1;
      return;
    }
    // The chunk is sequence 0: the step's arrays hold it first, so their prefixes describe it.
    Step chunk = s;
    chunk.tokens = s.chunk_tokens;
    chunk.num_seqs = 1;
    chunk.max_seq_tokens = static_cast<int32_t>(s.chunk_tokens);
    chunk.kv_len = s.chunk_kv_len;
    chunk.batch.num_seqs = 1;
    chunk.chunk_tokens = 0;
    // The one-token rows: sequence i + 1 and token chunk_tokens + i of the step are the part's
    // sequence and token i; its seq_start and token_seq are both 0, 1, 2, ...
    const int64_t n = s.chunk_tokens;
    Step rows;
    rows.tokens = s.tokens - n;
    rows.num_seqs = s.num_seqs - 1;
    rows.max_seq_tokens = 1;
    rows.kv_len = s.rows_kv_len;
    rows.ids = s.ids + n;
    rows.batch = {rows.num_seqs, s.ramp, s.batch.seq_slot + 1, s.batch.token_pos + n, s.ramp};
    parts_[0] = {0, chunk};
    parts_[1] = {n, rows};
    count_ = 2;
  }
  const StepPart* begin() const { return parts_.data(); }
  const StepPart* end() const { return parts_.data() + count_; }
  size_t size() const { return count_; }

 private:
  std::array<StepPart, 2> parts_{};
  size_t count_ = 0;
};

} // namespace ninfer::models
