/* How the tokens of one op call map to sequences. Shared by the ops that read or write
 * per-sequence state (KV cache, Gated DeltaNet conv and recurrent state) or need positions.
 *
 * A call carries T tokens from `num_seqs` sequences. The tokens of sequence i are the
 * contiguous rows [seq_start[i], seq_start[i+1]) in order, at consecutive positions; the
 * sequence owns state slot seq_slot[i] (distinct slots within one call). A prefill chunk is one
 * sequence of many tokens; a batched decode step is num_seqs sequences of one token each.
 *
 *   seq_start [num_seqs + 1]  token offsets; seq_start[0] = 0, seq_start[num_seqs] = T
 *   seq_slot  [num_seqs]      state / KV-cache slot of each sequence
 *   token_pos [T]             absolute position of each token in its sequence (0 = first token)
 *   token_seq [T]             index i of the sequence each token belongs to
 *
 * All arrays are int32, in device memory for CUDA variants and host memory for host ones.
 * A CUDA variant may read them before its launch wait, while the kernel launched before it on
 * the stream still runs (programmatic dependent launch): they are written before a step starts
 * (ninfer uploads them with a copy it waits for), never by the kernel right before an op.
 */
#ifndef NINFER_ABI_OPS_TOKEN_BATCH_H
#define NINFER_ABI_OPS_TOKEN_BATCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ninfer_token_batch {
  int32_t num_seqs;
  const int32_t* seq_start;
  const int32_t* seq_slot;
  const int32_t* token_pos;
  const int32_t* token_seq;
} ninfer_token_batch;

#ifdef __cplusplus
}
#endif

#endif
