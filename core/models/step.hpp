// One forward pass as the ops see it: how many tokens, from which sequences, at which
// positions. Pointers are backend memory (StepInputs uploads them). A mixed step (one prompt
// chunk and one-token rows of other sequences) also says where its two parts lie, so the ops
// that follow sequences can run over each part as a step of its own (step_parts.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ninfer/abi/ops/kv_append.h"
#include "ninfer/abi/ops/token_batch.h"
#include "ninfer/abi/plugin_abi.h"

namespace ninfer::models {

class KvBlockPool; // kv_block_pool.hpp

struct Step {
  int64_t tokens = 0;
  int32_t num_seqs = 0;
  int32_t max_seq_tokens = 0; // most tokens of one sequence (1 for a decode step)
  int32_t kv_len = 0;         // longest attended span: max position + 1
  const int32_t* ids = nullptr;
  ninfer_token_batch batch{};
  // A mixed step: sequence 0 is a prompt chunk of `chunk_tokens` (rows [0, chunk_tokens)), every
  // other sequence one token. 0 for any other step.
  int64_t chunk_tokens = 0;
  int32_t chunk_kv_len = 0; // the chunk's span (its last position + 1)
  int32_t rows_kv_len = 0;  // the one-token rows' longest span
  // 0, 1, 2, ... (max_sequences + 1 of them) on the backend: the one-token rows' own seq_start
  // and token_seq, which the step's arrays hold shifted by the chunk.
  const int32_t* ramp = nullptr;
  // A speculative round's verification pass: the recurrent layers also keep their state after
  // every token, so the round can settle each slot on the draft position it accepts.
  bool keep_token_states = false;
};

// The largest steps a model is built for; memory and workspace are sized from these.
struct StepLimits {
  int64_t max_tokens = 0;    // rows of every activation buffer
  int64_t max_mixed_chunk = 0; // most prompt tokens of a mixed step (0: no mixed steps)
  int32_t max_sequences = 0; // slots
  int64_t max_context = 0;   // positions per slot
  int32_t kv_dtype = NINFER_DTYPE_F32; // KV cache elements (ninfer_dtype: F32, F16, BF16, KV_*)
  bool state_snapshots = false;        // a second copy of each slot's recurrent state (ModelOptions)
  int32_t prefix_states = 0;           // copies of one sequence's recurrent state for the prefix cache
  int32_t draft_tokens = 0; // speculative rounds' drafts per sequence (0: no speculation)
  int32_t draft_vocab = 0;  // the drafter's argmax over ids [0, draft_vocab); 0: the whole vocabulary
  bool int4_draft_head = false; // the drafter's LM head rows quantized to int4 (Speculation::draft_head)
  // The KV block pool every attention layer's cache is laid out over (its table, block size,
  // blocks); set by build_decoder before the layers are built.
  const KvBlockPool* kv_pool = nullptr;
};

// Bytes of one head row of a KV cache of `dtype` (kv_append.h): its elements, and its scales.
inline size_t kv_row_bytes(int32_t dtype, int64_t head_dim) {
  return static_cast<size_t>(ninfer_kv_row_bytes(dtype, head_dim));
}
inline size_t kv_row_scale_bytes(int32_t dtype, int64_t head_dim) {
  return static_cast<size_t>(ninfer_kv_row_scale_bytes(dtype, head_dim));
}

} // namespace ninfer::models
