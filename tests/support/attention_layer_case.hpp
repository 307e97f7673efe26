// What the tests of an attention layer's decode ops share: where the q, k and v head rows of a
// fused q|k|v projection row lie, and a call's token batch built from its sequences.
#pragma once

#include <cstdint>
#include <vector>

namespace ninfer::test {

// One attention layer's heads. Projection row: [q heads (| gates) | k heads | v heads | 3 pad].
struct AttentionLayout {
  int32_t q_heads, kv_heads, head_dim, rotary_dim;
  double theta;
  bool gated; // Qwen3.5's q_proj: per head [query | gate]
  int64_t q_head_stride() const { return gated ? 2 * head_dim : head_dim; }
  int64_t k_offset() const { return q_heads * q_head_stride(); }
  int64_t v_offset() const { return k_offset() + int64_t{kv_heads} * head_dim; }
  int64_t token_stride() const { return v_offset() + int64_t{kv_heads} * head_dim + 3; }
};

// A sequence of a call: its slot, its first position in the call, its tokens.
struct SeqSpan {
  int32_t slot, pos0, n;
};

// The call's token batch arrays on the host (ninfer/abi/ops/token_batch.h).
struct HostTokenBatch {
  std::vector<int32_t> seq_start{0}, seq_slot, token_pos, token_seq;
  HostTokenBatch() = default;
  explicit HostTokenBatch(const std::vector<SeqSpan>& seqs) {
    for (size_t i = 0; i < seqs.size(); ++i) {
      seq_slot.push_back(seqs[i].slot);
      for (int32_t j = 0; j < seqs[i].n; ++j) {
        token_pos.push_back(seqs[i].pos0 + j);
        token_seq.push_back(static_cast<int32_t>(i));
      }
      seq_start.push_back(seq_start.back() + seqs[i].n);
    }
  }
  int64_t tokens() const { return static_cast<int64_t>(token_pos.size()); }
};

} // namespace ninfer::test
