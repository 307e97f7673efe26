/* Op contract: rms_norm — RMSNorm over rows, optionally after a fused residual add.
 *
 * Rows are (token t, group j) for t in [0, T), j in [0, groups); a row has `dim` contiguous
 * float32 elements at x + t*x_token_stride + j*x_group_stride (likewise for y and residual).
 * One row per token (groups = 1) is the layer norm of the hidden state; groups = heads with
 * dim = head_dim is the per-head q/k norm of attention.
 *
 *   s        = x + residual          when residual != NULL, and then residual := s
 *            = x                     otherwise
 *   y        = s * rsqrt(mean(s^2) + eps) * scale
 *   scale[i] = weight[i]             weight_offset = 0  (Qwen3: weights stored around 1)
 *            = 1 + weight[i]         weight_offset = 1  (Qwen3.5: weights stored around 0)
 *
 * Shapes: weight [dim] float32. All tensors float32.
 * Planning shape: tokens = T, dims[0] = dim, dims[1] = groups, dtype = F32.
 *
 * Effects: writes y (and residual, when given) for the launch's tokens. y may be x itself
 * (same pointer and strides: in place); no other overlap is allowed. mean(s^2) is accumulated
 * in float32 or wider. Workspace: none.
 */
#ifndef NINFER_ABI_OPS_RMS_NORM_H
#define NINFER_ABI_OPS_RMS_NORM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_RMS_NORM "rms_norm"

typedef struct ninfer_rms_norm_args {
  const float* x;
  int64_t x_token_stride;
  int64_t x_group_stride;
  float* residual; /* optional */
  int64_t residual_token_stride;
  int64_t residual_group_stride;
  const float* weight;
  float* y;
  int64_t y_token_stride;
  int64_t y_group_stride;
  int64_t tokens;
  int32_t groups;
  int32_t dim;
  float eps;
  int32_t weight_offset; /* 0: scale by w, 1: scale by (1 + w) */
} ninfer_rms_norm_args;

#ifdef __cplusplus
}
#endif

#endif
