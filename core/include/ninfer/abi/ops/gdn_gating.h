/* Op contract: gdn_gating — the Gated DeltaNet gating projection of Qwen3.5.
 *
 * Math, for every token t in [0, T) and value head h in [0, heads):
 *   a[t,h]    = sum_k x[t,k] * w_a[h,k]
 *   b[t,h]    = sum_k x[t,k] * w_b[h,k]
 *   g[t,h]    = -exp(a_log[h]) * softplus(a[t,h] + dt_bias[h])     (log-space decay, <= 0)
 *   beta[t,h] = sigmoid(b[t,h])
 * softplus(z) = log(1 + exp(z)), evaluated without overflow for large z.
 *
 * Shapes: x [T, hidden] (row stride x_row_stride elements), w_a and w_b [heads, hidden]
 * contiguous, a_log and dt_bias [heads] float32, g and beta [T, heads] float32 contiguous.
 * dtype: x, w_a and w_b share one dtype (F32 or BF16); accumulation is float32 or wider.
 * Planning shape: tokens = T, dims[0] = hidden, dims[1] = heads, dtype = the input dtype.
 *
 * Effects: writes g and beta for the launch's token range only; reads nothing else it writes.
 * Workspace: variant->workspace_bytes(shape, tokens_in_launch) bytes, caller-owned; no
 * allocation happens inside the op. Pointers are device pointers for CUDA variants, host
 * pointers for host variants.
 */
#ifndef NINFER_ABI_OPS_GDN_GATING_H
#define NINFER_ABI_OPS_GDN_GATING_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_GDN_GATING "gdn_gating"

typedef struct ninfer_gdn_gating_args {
  const void* x;
  int64_t x_row_stride;
  const void* w_a;
  const void* w_b;
  const float* a_log;
  const float* dt_bias;
  float* g;
  float* beta;
  int64_t tokens; /* T of the whole call; a launch covers part of it */
  int32_t hidden;
  int32_t heads;
  int32_t dtype; /* ninfer_dtype of x, w_a, w_b */
} ninfer_gdn_gating_args;

#ifdef __cplusplus
}
#endif

#endif
