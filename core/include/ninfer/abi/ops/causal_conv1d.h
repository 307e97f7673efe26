/* Op contract: causal_conv1d — the depthwise causal convolution + SiLU of a Gated DeltaNet
 * layer, with a per-slot state that carries the last kernel-1 inputs across calls.
 *
 * For each sequence i of the batch (slot s = batch.seq_slot[i], tokens t0 .. t0+n-1) and
 * channel c, let win be the kernel-1 inputs in state[s, c, :] (oldest first) followed by the
 * sequence's inputs x[t0 .. t0+n-1, c]. Then for u in [0, n):
 *   out[t0 + u, c] = silu( sum_{j=0}^{kernel-1} weight[c, j] * win[u + j] )
 * and afterwards state[s, c, :] = the last kernel-1 entries of win. This equals PyTorch's
 * Conv1d(groups=channels, padding=kernel-1) over the whole sequence, cut to its length, when
 * the state of a new sequence is zero: callers zero a slot's state when the slot starts a new
 * sequence.
 *
 * Shapes: x [T, channels] float32 with row stride x_token_stride; weight [channels, kernel]
 * float32 (the checkpoint's [channels, 1, kernel]); state [slots, channels, kernel - 1]
 * float32; out [T, channels] with row stride out_token_stride, not overlapping x.
 * Planning shape: tokens = T, dims[0] = channels, dims[1] = kernel, dtype = F32.
 *
 * Token states: when token_states is not NULL (the shape has NINFER_SHAPE_TOKEN_STATES), the
 * state after every token is also written: token_states[t, c, :] = the last kernel-1 entries of
 * win[.. u], for token t = t0 + u, laid out as the state ([T, channels, kernel - 1] float32).
 * Speculative verification keeps them to settle each slot on the draft position it accepts
 * (docs/speculative.md). A variant that does not write them refuses such shapes.
 *
 * Effects: writes out for the batch's tokens and updates state of the batch's slots (and
 * token_states, when given). A sequence is processed in token order, so a launch covers whole
 * sequences (host variants take the whole call in one launch). Workspace: none.
 */
#ifndef NINFER_ABI_OPS_CAUSAL_CONV1D_H
#define NINFER_ABI_OPS_CAUSAL_CONV1D_H

#include <stdint.h>

#include "ninfer/abi/ops/token_batch.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_CAUSAL_CONV1D "causal_conv1d"

typedef struct ninfer_causal_conv1d_args {
  const float* x;
  int64_t x_token_stride;
  const float* weight;
  float* state;
  float* out;
  int64_t out_token_stride;
  ninfer_token_batch batch;
  int64_t tokens;
  int32_t channels;
  int32_t kernel;
  float* token_states; /* NULL, or [T, channels, kernel - 1]: the state after each token */
} ninfer_causal_conv1d_args;

#ifdef __cplusplus
}
#endif

#endif
