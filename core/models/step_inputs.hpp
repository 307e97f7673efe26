// Builds a Step on the host (ids, sequence starts, slots, positions) and uploads it into one
// int32 backend buffer sized for the largest step.
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

  // Uploads the chunks as one step (tokens in chunk order).
  Step upload(std::span<const SequenceChunk> chunks);
  // A step with the given shape whose arrays point at this buffer but hold nothing
  // meaningful: for sizing workspace before any real step (ops are not executed).
  Step shape_only(int64_t tokens, int32_t num_seqs, int32_t max_seq_tokens, int32_t kv_len) const;

 private:
  Backend& backend_;
  StepLimits limits_;
  DeviceBuffer buffer_;
  // Element offsets of each array in buffer_.
  int64_t ids_at_, seq_start_at_, seq_slot_at_, token_pos_at_, token_seq_at_, total_;
  std::vector<int32_t> host_;
};

} // namespace ninfer::models
