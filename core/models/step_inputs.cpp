#include "step_inputs.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ninfer/support/error.hpp"

namespace ninfer::models {

StepInputs::Layout StepInputs::Layout::of(int64_t tokens, int64_t sequences) {
  Layout l;
  l.ids = 0;
  l.seq_start = l.ids + tokens;
  l.seq_slot = l.seq_start + sequences + 1;
  l.token_pos = l.seq_slot + sequences;
  l.token_seq = l.token_pos + tokens;
  l.total = l.token_seq + tokens;
  return l;
}

StepInputs::StepInputs(Backend& backend, const StepLimits& limits) : backend_(backend), limits_(limits) {
  // Offsets only grow with the step's tokens and sequences: the largest step bounds them all.
  const int64_t most = Layout::of(limits.max_tokens, limits.max_sequences).total;
  buffer_ = backend.allocate(sizeof(int32_t) * most, MemoryUse::Activations, "step inputs (ids, positions)");
  host_.resize(most);
  std::vector<int32_t> ramp(static_cast<size_t>(limits.max_sequences) + 1);
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<int32_t>(i);
  ramp_ = backend.allocate(sizeof(int32_t) * ramp.size(), MemoryUse::Activations, "step inputs (ramp)");
  backend.upload(ramp_, 0, ramp.data(), sizeof(int32_t) * ramp.size());
}

namespace {

// A first chunk of several tokens, then only one-token chunks (at least one).
bool is_mixed(std::span<const SequenceChunk> chunks) {
  if (chunks.size() < 2 || chunks.front().ids.size() < 2) return false;
  return std::all_of(chunks.begin() + 1, chunks.end(), [](const SequenceChunk& c) { return c.ids.size() == 1; });
}

} // namespace

Step StepInputs::upload(std::span<const SequenceChunk> chunks) {
  int64_t T = 0;
  for (const auto& c : chunks) T += static_cast<int64_t>(c.ids.size());
  if (T == 0 || T > limits_.max_tokens || chunks.size() > static_cast<size_t>(limits_.max_sequences))
    throw Error(fmt::format("internal: a step of {} tokens in {} sequences exceeds the model's limits ({} tokens, "
                            "{} sequences)",
                            T, chunks.size(), limits_.max_tokens, limits_.max_sequences));
  Step s = shape_only(T, static_cast<int32_t>(chunks.size()), 0, 0);
  const Layout at = Layout::of(T, static_cast<int64_t>(chunks.size()));
  int32_t* h = host_.data();
  int64_t t = 0;
  h[at.seq_start] = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const auto& c = chunks[i];
    h[at.seq_slot + i] = c.slot;
    for (size_t j = 0; j < c.ids.size(); ++j, ++t) {
      h[at.ids + t] = c.ids[j];
      h[at.token_pos + t] = static_cast<int32_t>(c.first_position + static_cast<int64_t>(j));
      h[at.token_seq + t] = static_cast<int32_t>(i);
    }
    h[at.seq_start + i + 1] = static_cast<int32_t>(t);
    s.max_seq_tokens = std::max(s.max_seq_tokens, static_cast<int32_t>(c.ids.size()));
    s.kv_len = std::max(s.kv_len, static_cast<int32_t>(c.first_position + static_cast<int64_t>(c.ids.size())));
  }
  if (is_mixed(chunks)) {
    const SequenceChunk& c = chunks.front();
    s.chunk_tokens = static_cast<int64_t>(c.ids.size());
    s.chunk_kv_len = static_cast<int32_t>(c.first_position + s.chunk_tokens);
    for (size_t i = 1; i < chunks.size(); ++i)
      s.rows_kv_len = std::max(s.rows_kv_len, static_cast<int32_t>(chunks[i].first_position + 1));
  }
  // The arrays are packed for this step's sizes: one copy of exactly what it uses (a decode
  // step of one sequence: 20 bytes), and every copy waits for the stream.
  backend_.upload(buffer_, 0, h, sizeof(int32_t) * at.total);
  return s;
}

void StepInputs::copy_ids(int64_t first, const DeviceBuffer& src, size_t src_offset, int64_t count) {
  backend_.copy(buffer_, sizeof(int32_t) * static_cast<size_t>(first), src, src_offset,
                sizeof(int32_t) * static_cast<size_t>(count));
}

Step StepInputs::shape_only(int64_t tokens, int32_t num_seqs, int32_t max_seq_tokens, int32_t kv_len) const {
  const int32_t* base = buffer_.as<int32_t>();
  const Layout at = Layout::of(tokens, num_seqs);
  Step s;
  s.tokens = tokens;
  s.num_seqs = num_seqs;
  s.max_seq_tokens = max_seq_tokens;
  s.kv_len = kv_len;
  s.ids = base + at.ids;
  s.batch = {num_seqs, base + at.seq_start, base + at.seq_slot, base + at.token_pos, base + at.token_seq};
  s.ramp = ramp_.as<int32_t>();
  return s;
}

Step StepInputs::mixed_shape_only(int64_t chunk, int32_t rows, int32_t kv_len) const {
  Step s = shape_only(chunk + rows, rows + 1, static_cast<int32_t>(chunk), kv_len);
  s.chunk_tokens = chunk;
  s.chunk_kv_len = kv_len;
  s.rows_kv_len = kv_len;
  return s;
}

} // namespace ninfer::models
