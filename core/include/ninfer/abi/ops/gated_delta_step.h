/* Op contract: gated_delta_step — a Gated DeltaNet layer's step after its conv for decode and
 * verification: the gating, the delta rule's update per token, and the gated output norm, in
 * one op.
 *
 * A call is a decode step (one token per sequence) or a speculative verification pass (a few
 * tokens per sequence); each sequence's tokens are taken in order, each from the state the one
 * before it left. For token t (sequence i = batch.token_seq[t], slot s = batch.seq_slot[i]) and
 * value head h, with key head kh = h / (v_heads / k_heads) and S = state[s, h] a [k_dim, v_dim]
 * matrix:
 *   g     = -exp(a_log[h]) * softplus(a[t,h] + dt_bias[h])       (gdn_gating's formulas, on
 *   beta  = sigmoid(b[t,h])                                        the raw projections a, b)
 *   S     = exp(g) * S
 *   u     = beta * (v_t - S^T k_t)                                (gated_delta_rule's lines)
 *   S     = S + k_t u^T
 *   o     = S^T (scale * q_t)
 *   out[t, h, :] = o * rsqrt(mean(o^2) + eps) * norm_w * silu(z[t, h, :])   (gated_rms_norm's)
 * The output norm takes o as the recurrence computed it (float32 or wider), not rounded first.
 *
 * Shapes: q and k head rows are k_dim float32 at q + t*qk_token_stride + kh*k_dim (k alike);
 * v and z head rows are v_dim float32 at v + t*v_token_stride + h*v_dim (z with
 * z_token_stride); a[t,h] at a + t*ab_token_stride + h (b alike); a_log, dt_bias [v_heads],
 * norm_w [v_dim] float32; state [slots, v_heads, k_dim, v_dim] float32 (row = key index); out
 * [T, v_heads, v_dim] float32 with row stride out_token_stride, not overlapping the inputs.
 * Planning shape: tokens = T, dims[0] = v_heads, dims[1] = k_dim, dims[2] = v_dim,
 * dims[3] = k_heads, dtype = F32, max_seq_tokens = the most tokens of one sequence (0: not
 * stated). A variant walks a sequence's tokens one after the other, so each states the longest
 * walk it takes (a verification pass's few tokens); longer sequences (prompt chunks) run the
 * core's form, gdn_gating, gated_delta_rule (its chunked forms) and gated_rms_norm.
 *
 * Ordering: a variant may read the batch arrays, the weights and the slots' state while the
 * kernel launched before it on the stream still runs (programmatic dependent launch), so that
 * kernel (or op) must not write them. A launch covers whole sequences.
 *
 * Token states: as gated_delta_rule's (token_states[t] = the state after token t, when not
 * NULL and the shape has NINFER_SHAPE_TOKEN_STATES). A variant that does not write them refuses
 * such shapes; the core's form (gdn_gating, gated_delta_rule, gated_rms_norm) passes them on.
 *
 * Effects: writes out for the launch's tokens and replaces the state of their slots (and
 * token_states, when given). Workspace: variant->workspace_bytes(shape, tokens), caller-owned.
 */
#ifndef NINFER_ABI_OPS_GATED_DELTA_STEP_H
#define NINFER_ABI_OPS_GATED_DELTA_STEP_H

#include <stdint.h>

#include "ninfer/abi/ops/token_batch.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_GATED_DELTA_STEP "gated_delta_step"

typedef struct ninfer_gated_delta_step_args {
  const float* q;
  const float* k;
  int64_t qk_token_stride;
  const float* v;
  int64_t v_token_stride;
  const float* a;
  const float* b;
  int64_t ab_token_stride;
  const float* a_log;
  const float* dt_bias;
  const float* z;
  int64_t z_token_stride;
  const float* norm_w;
  float eps;
  float scale;
  float* state;
  float* out;
  int64_t out_token_stride;
  ninfer_token_batch batch;
  int64_t tokens;
  int32_t k_heads;
  int32_t v_heads;
  int32_t k_dim;
  int32_t v_dim;
  float* token_states; /* NULL, or [T, v_heads, k_dim, v_dim]: the state after each token */
} ninfer_gated_delta_step_args;

#ifdef __cplusplus
}
#endif

#endif
