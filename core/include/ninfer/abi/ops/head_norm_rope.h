/* Op contract: head_norm_rope — the per-head RMSNorm of attention's q and k heads followed by
 * the rotary embedding of both, in place, in one call.
 *
 * Exactly rms_norm (rms_norm.h, per head, in place, no residual) of every q head row with
 * q_weight and of every k head row with k_weight, then rope (rope.h) of every q and k head
 * row, the rotation reading the normalised values as float32:
 *   for every token t and head row r of q (q_heads rows) and of k (k_heads rows):
 *     y        = r * rsqrt(mean(r^2) + eps) * scale        (mean over head_dim elements)
 *     scale[i] = weight[i]      weight_offset = 0  (Qwen3: weights stored around 1)
 *              = 1 + weight[i]  weight_offset = 1  (Qwen3.5: weights stored around 0)
 *     r        = y rounded to float32, then pairs (r[i], r[i + rotary_dim/2]),
 *                i < rotary_dim/2, rotated by positions[t] * theta^(-2i / rotary_dim)
 *                as rope.h says; r[rotary_dim, head_dim) keeps the normalised value.
 * A plugin fuses the two so that each head row is read and written once per layer and the
 * three launches (q norm, k norm, rope) of a decode step's attention layer become one.
 *
 * Shapes: q head row (t, h) is head_dim float32 at q + t*q_token_stride + h*q_head_stride
 * (Qwen3.5's gated q_proj interleaves [query | gate] per head: q_head_stride = 2*head_dim);
 * likewise k. q_weight and k_weight [head_dim] float32; positions [T] int32, >= 0;
 * rotary_dim even, in (0, head_dim].
 * Planning shape: tokens = T, dims[0] = head_dim, dims[1] = q_heads, dims[2] = k_heads,
 * dims[3] = rotary_dim, dtype = F32.
 *
 * Effects: rewrites the q and k head rows of the launch's tokens, nothing else (the gate
 * halves between q rows are untouched). q and k rows must not overlap. Sums of squares
 * accumulate in float32 or wider; angles are evaluated as rope.h says. Workspace: none.
 *
 * Ordering: a variant may read positions and the weights while the kernel launched before it
 * on the stream still runs (programmatic dependent launch), so that kernel (or op) must not
 * write them.
 */
#ifndef NINFER_ABI_OPS_HEAD_NORM_ROPE_H
#define NINFER_ABI_OPS_HEAD_NORM_ROPE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_HEAD_NORM_ROPE "head_norm_rope"

typedef struct ninfer_head_norm_rope_args {
  float* q;
  int64_t q_token_stride;
  int64_t q_head_stride;
  float* k;
  int64_t k_token_stride;
  int64_t k_head_stride;
  const float* q_weight;
  const float* k_weight;
  const int32_t* positions;
  int64_t tokens;
  int32_t q_heads;
  int32_t k_heads;
  int32_t head_dim;
  int32_t rotary_dim;
  float eps;
  int32_t weight_offset; /* 0: scale by w, 1: scale by (1 + w) */
  double theta;
} ninfer_head_norm_rope_args;

#ifdef __cplusplus
}
#endif

#endif
