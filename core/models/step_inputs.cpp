#include "step_inputs.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ninfer/error.hpp"

namespace ninfer::models {

StepInputs::StepInputs(Backend& backend, const StepLimits& limits) : backend_(backend), limits_(limits) {
  const int64_t T = limits.max_tokens, S = limits.max_sequences;
  ids_at_ = 0;
  seq_start_at_ = ids_at_ + T;
  seq_slot_at_ = seq_start_at_ + S + 1;
  token_pos_at_ = seq_slot_at_ + S;
  token_seq_at_ = token_pos_at_ + T;
  total_ = token_seq_at_ + T;
  buffer_ = backend.allocate(sizeof(int32_t) * total_, MemoryUse::Activations, "step inputs (ids, positions)");
  host_.resize(total_);
}

Step StepInputs::upload(std::span<const SequenceChunk> chunks) {
  int64_t T = 0;
  for (const auto& c : chunks) T += static_cast<int64_t>(c.ids.size());
  if (T == 0 || T > limits_.max_tokens || chunks.size() > static_cast<size_t>(limits_.max_sequences))
    throw Error(fmt::format("internal: a step of {} tokens in {} sequences exceeds the model's limits ({} tokens, "
                            "{} sequences)",
                            T, chunks.size(), limits_.max_tokens, limits_.max_sequences));
  Step s = shape_only(T, static_cast<int32_t>(chunks.size()), 0, 0);
  int32_t* h = host_.data();
  int64_t t = 0;
  h[seq_start_at_] = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const auto& c = chunks[i];
    h[seq_slot_at_ + i] = c.slot;
    for (size_t j = 0; j < c.ids.size(); ++j, ++t) {
      h[ids_at_ + t] = c.ids[j];
      h[token_pos_at_ + t] = static_cast<int32_t>(c.first_position + static_cast<int64_t>(j));
      h[token_seq_at_ + t] = static_cast<int32_t>(i);
    }
    h[seq_start_at_ + i + 1] = static_cast<int32_t>(t);
    s.max_seq_tokens = std::max(s.max_seq_tokens, static_cast<int32_t>(c.ids.size()));
    s.kv_len = std::max(s.kv_len, static_cast<int32_t>(c.first_position + static_cast<int64_t>(c.ids.size())));
  }
  // One upload of the used prefix of each array (they are small; one copy keeps it simple).
  backend_.upload(buffer_, 0, h, sizeof(int32_t) * total_);
  return s;
}

Step StepInputs::shape_only(int64_t tokens, int32_t num_seqs, int32_t max_seq_tokens, int32_t kv_len) const {
  const int32_t* base = buffer_.as<int32_t>();
  Step s;
  s.tokens = tokens;
  s.num_seqs = num_seqs;
  s.max_seq_tokens = max_seq_tokens;
  s.kv_len = kv_len;
  s.ids = base + ids_at_;
  s.batch = {num_seqs, base + seq_start_at_, base + seq_slot_at_, base + token_pos_at_, base + token_seq_at_};
  return s;
}

} // namespace ninfer::models
