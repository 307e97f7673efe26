/* Op contract: l2_norm — L2-normalise head rows in place (Gated DeltaNet q and k).
 *
 * For every token t and head h, the row r of dim float32 at x + t*token_stride + h*head_stride:
 *   r = r * rsqrt(sum(r^2) + eps)
 * (the FLA / transformers convention: eps inside the root, 1e-6 for Qwen3.5).
 * Planning shape: tokens = T, dims[0] = dim, dims[1] = heads, dtype = F32.
 *
 * Effects: rewrites the rows of the launch's tokens; the sum accumulates in float32 or wider.
 * Workspace: none.
 */
#ifndef NINFER_ABI_OPS_L2_NORM_H
#define NINFER_ABI_OPS_L2_NORM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_L2_NORM "l2_norm"

typedef struct ninfer_l2_norm_args {
  float* x;
  int64_t token_stride;
  int64_t head_stride;
  int64_t tokens;
  int32_t heads;
  int32_t dim;
  float eps;
} ninfer_l2_norm_args;

#ifdef __cplusplus
}
#endif

#endif
