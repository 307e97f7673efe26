/* Op contract: gated_delta_rule — the recurrence of a Gated DeltaNet layer, with a float32
 * state per slot carried across calls.
 *
 * Per sequence i of the batch (slot s = batch.seq_slot[i]) and value head h, with key head
 * kh = h / (v_heads / k_heads) (each key head serves that many consecutive value heads, as
 * transformers' repeat_interleave does), S = state[s, h] a [k_dim, v_dim] matrix, and for
 * each token t of the sequence in order (q_t, k_t rows of head kh; v_t, g_t, beta_t of h):
 *   S      = exp(g_t) * S                          (decay first; g_t <= 0 is log-space)
 *   u_t    = beta_t * (v_t - S^T k_t)              (the delta: what S does not yet predict)
 *   S      = S + k_t u_t^T
 *   out_t  = S^T (scale * q_t)                     (read after the update)
 * q and k are used as given: Qwen3.5 L2-normalises them first (l2_norm) and uses
 * scale = 1/sqrt(k_dim).
 *
 * Variants may evaluate this token by token (recurrent form, decode) or 64 tokens at a time
 * with the equivalent WY / UT-transform matrices (chunked form, prefill); results agree to
 * float32 rounding, which tests check.
 *
 * Shapes: q and k head rows are k_dim float32 at q + t*qk_token_stride + kh*k_dim (k alike);
 * v head rows are v_dim float32 at v + t*v_token_stride + h*v_dim; g and beta [T, v_heads]
 * float32 contiguous; state [slots, v_heads, k_dim, v_dim] float32 (row = key index); out
 * [T, v_heads, v_dim] float32 with row stride out_token_stride, not overlapping the inputs.
 * Planning shape: tokens = T, dims[0] = the most tokens of one sequence in this call (1 for a
 * decode step), dims[1] = v_heads, dims[2] = k_dim, dims[3] = v_dim, dtype = F32.
 *
 * Token states: when token_states is not NULL (the shape has NINFER_SHAPE_TOKEN_STATES), the
 * state after every token t is also written to token_states[t] ([T, v_heads, k_dim, v_dim]
 * float32, laid out as one slot of `state`). Speculative verification keeps them to settle each
 * slot on the draft position it accepts (docs/speculative.md). A variant that does not write
 * them refuses such shapes.
 *
 * Effects: writes out for the batch's tokens and replaces the state of the batch's slots with
 * the state after their last token (and token_states, when given). Sequences are sequential in
 * tokens, so a launch covers whole sequences. A new sequence starts from a zeroed slot (the
 * caller zeroes it).
 * Workspace: variant->workspace_bytes(shape, tokens), caller-owned.
 */
#ifndef NINFER_ABI_OPS_GATED_DELTA_RULE_H
#define NINFER_ABI_OPS_GATED_DELTA_RULE_H

#include <stdint.h>

#include "ninfer/abi/ops/token_batch.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_GATED_DELTA_RULE "gated_delta_rule"

typedef struct ninfer_gated_delta_rule_args {
  const float* q;
  const float* k;
  int64_t qk_token_stride;
  const float* v;
  int64_t v_token_stride;
  const float* g;
  const float* beta;
  float* state;
  float* out;
  int64_t out_token_stride;
  ninfer_token_batch batch;
  int64_t tokens;
  int32_t k_heads;
  int32_t v_heads;
  int32_t k_dim;
  int32_t v_dim;
  float scale;
  float* token_states; /* NULL, or [T, v_heads, k_dim, v_dim]: the state after each token */
} ninfer_gated_delta_rule_args;

#ifdef __cplusplus
}
#endif

#endif
