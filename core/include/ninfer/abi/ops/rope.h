/* Op contract: rope — rotary position embedding, Qwen / GPT-NeoX "half split" layout, full or
 * partial, applied in place.
 *
 * For every token t, head h, and i in [0, rotary_dim / 2), with p = positions[t] and
 * half = rotary_dim / 2, the pair (x[i], x[i + half]) of the head's row is rotated:
 *   inv_freq[i] = theta ^ (-2i / rotary_dim)
 *   angle       = p * inv_freq[i]
 *   x[i]        = x[i] * cos(angle) - x[i + half] * sin(angle)
 *   x[i + half] = x[i + half] * cos(angle) + x[i] * sin(angle)     (both from the old values)
 * Elements [rotary_dim, head_dim) are untouched (partial rotary: Qwen3.5 rotates 25%).
 *
 * Shapes: the head row of (t, h) is head_dim float32 at x + t*token_stride + h*head_stride;
 * positions [T] int32, >= 0; rotary_dim even, <= head_dim.
 * Planning shape: tokens = T, dims[0] = head_dim, dims[1] = heads, dims[2] = rotary_dim,
 * dtype = F32.
 *
 * Effects: rewrites the first rotary_dim elements of each row of the launch's tokens. Angles
 * are evaluated in double on the host (positions up to 262,144 keep full float32 accuracy).
 * Workspace: none.
 */
#ifndef NINFER_ABI_OPS_ROPE_H
#define NINFER_ABI_OPS_ROPE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_ROPE "rope"

typedef struct ninfer_rope_args {
  float* x;
  int64_t token_stride;
  int64_t head_stride;
  const int32_t* positions;
  int64_t tokens;
  int32_t heads;
  int32_t head_dim;
  int32_t rotary_dim;
  double theta;
} ninfer_rope_args;

#ifdef __cplusplus
}
#endif

#endif
