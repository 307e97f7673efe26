/* Op contract: sigmoid_gate — the output gate of Qwen3.5 full-attention layers, in place.
 *
 * For every token t, head h, d in [0, head_dim):
 *   x[t, h, d] = x[t, h, d] * sigmoid(gate[t, h, d])
 * x rows are [heads, head_dim] float32 contiguous per token at x + t*x_token_stride; gate
 * elements are at gate + t*gate_token_stride + h*gate_head_stride + d (Qwen3.5's q_proj output
 * interleaves per head [query (head_dim), gate (head_dim)], so the gate is read where it lies).
 * Planning shape: tokens = T, dims[0] = head_dim, dims[1] = heads, dtype = F32.
 *
 * Effects: rewrites x for the launch's tokens; gate must not overlap x. Workspace: none.
 */
#ifndef NINFER_ABI_OPS_SIGMOID_GATE_H
#define NINFER_ABI_OPS_SIGMOID_GATE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_SIGMOID_GATE "sigmoid_gate"

typedef struct ninfer_sigmoid_gate_args {
  float* x;
  int64_t x_token_stride;
  const float* gate;
  int64_t gate_token_stride;
  int64_t gate_head_stride;
  int64_t tokens;
  int32_t heads;
  int32_t head_dim;
} ninfer_sigmoid_gate_args;

#ifdef __cplusplus
}
#endif

#endif
