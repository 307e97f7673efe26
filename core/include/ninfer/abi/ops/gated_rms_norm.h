/* Op contract: gated_rms_norm — the output norm of a Gated DeltaNet layer: RMSNorm of each
 * value-head row, scaled by w, times SiLU of the gate z.
 *
 * For every token t and head h, with x and z the rows of dim float32 at
 * x + t*x_token_stride + h*dim and z + t*z_token_stride + h*dim:
 *   y[t, h, :] = x * rsqrt(mean(x^2) + eps) * weight * silu(z)
 * (weight [dim] float32, used as is: Qwen3.5 stores it around 1 here, unlike its other norms.)
 * y is [T, heads, dim] float32 with row stride y_token_stride; it may be x itself (in place).
 * Planning shape: tokens = T, dims[0] = dim, dims[1] = heads, dtype = F32.
 *
 * Effects: writes y rows of the launch's tokens. Workspace: none.
 */
#ifndef NINFER_ABI_OPS_GATED_RMS_NORM_H
#define NINFER_ABI_OPS_GATED_RMS_NORM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_GATED_RMS_NORM "gated_rms_norm"

typedef struct ninfer_gated_rms_norm_args {
  const float* x;
  int64_t x_token_stride;
  const float* z;
  int64_t z_token_stride;
  const float* weight;
  float* y;
  int64_t y_token_stride;
  int64_t tokens;
  int32_t heads;
  int32_t dim;
  float eps;
} ninfer_gated_rms_norm_args;

#ifdef __cplusplus
}
#endif

#endif
