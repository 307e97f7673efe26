// Builds a Step on the host (ids, sequence starts, slots, positions) and uploads it into one
// int32 backend buffer sized for the largest step. The arrays are packed for the step's own
// token and sequence counts, so a step's arrays sit at the same addresses as every other step
// of those counts (a decode recording is made per count and replays with them). Beside them
// sits a constant ramp 0, 1, 2, ..., the arrays of a mixed step's one-token rows (step_parts.hpp).
#pragma once

#include <span>
#include <vector>

#include "ninfer/runtime/backend.hpp"
#include "step.hpp"

namespace ninfer::models {

struct SequenceChunk {
  int32_t slot;
  int64_t first_position;
  std::span<const int32_t> ids;
};

class StepInputs {
 public:
  StepInputs(Backend& backend, const StepLimits& limits);

  // Uploads the chunks as one step (tokens in chunk order). A first chunk of several tokens
  // followed by one-token chunks is a mixed step (Step::chunk_tokens).
  Step upload(std::span<const SequenceChunk> chunks);
  // Replaces `count` ids of the step just uploaded, from token `first` on, with the int32 ids at
  // byte `src_offset` of `src`, on the backend (ids come first in every layout: token t's id is
  // element t whatever the step's size).
  void copy_ids(int64_t first, const DeviceBuffer& src, size_t src_offset, int64_t count);
  // A step with the given shape whose arrays point at this buffer but hold nothing
  // meaningful: for sizing workspace before any real step (ops are not executed).
  Step shape_only(int64_t tokens, int32_t num_seqs, int32_t max_seq_tokens, int32_t kv_len) const;
  // The same for a mixed step: a chunk of `chunk` tokens and `rows` one-token rows.
  Step mixed_shape_only(int64_t chunk, int32_t rows, int32_t kv_len) const;

 private:
  Backend& backend_;
  StepLimits limits_;
  DeviceBuffer buffer_;
  DeviceBuffer ramp_; // 0, 1, ..., max_sequences
  // Element offsets of each array in buffer_ for a step of `tokens` tokens in `sequences`.
  struct Layout {
    int64_t ids, seq_start, seq_slot, token_pos, token_seq, total;
    static Layout of(int64_t tokens, int64_t sequences);
  };
  std::vector<int32_t> host_;
};

} // namespace ninfer::models
