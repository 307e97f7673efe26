/* Op contract: norm_linear — a bias-free dense layer on RMS-normalised rows, optionally followed
 * by SwiGLU: what a transformer block's first projection computes from the residual stream, in
 * one op, so decode does not pay a separate norm (and activation) launch per block.
 *
 * Math, for every token t in [0, T), with K = in_features:
 *   r        = 1 / sqrt(sum_k x[t, k]^2 / K + eps)
 *   xn[k]    = x[t, k] * r * s[k],      s[k] = norm_w[k] (norm_offset 0) or 1 + norm_w[k] (1)
 *   p[n]     = sum_k xn[k] * w[n, k],   n in [0, out_features)
 *   gated 0: y[t, n] = p[n]                                   for n < out_features
 *   gated 1: y[t, n] = silu(p[n]) * p[n + out_features / 2]   for n < out_features / 2
 *            (w holds the gate rows, then the up rows), silu(z) = z / (1 + exp(-z))
 *   normed != NULL: normed[t, k] = xn[k] (for a second consumer of the normed rows)
 * It equals rms_norm (no residual) into a buffer, linear on it, and (gated) silu_mul on the two
 * halves; the core runs exactly those ops (its unfused form) where a plugin has no variant for
 * the shape.
 *
 * Shapes: x [T, K] float32, row stride x_row_stride; norm_w [K] float32; w [out_features, K]
 * contiguous in w_dtype (F32 or BF16, or a quantized dtype: w holds the codes and wq the rest
 * of the matrix, ninfer/abi/ops/quant_weight.h, as for linear); y [T, out_features (gated: / 2)] float32, row stride
 * y_row_stride; normed [T, K] float32, row stride normed_row_stride, or NULL. Accumulation is
 * float32 or wider. Planning shape: tokens = T, dims[0] = K, dims[1] = out_features,
 * dims[2] = gated, dims[3] = ninfer_quant_planning_layout(wq) (linear.h), dtype = w_dtype.
 *
 * Effects: writes y (and normed) rows of the launch's tokens; y and normed must not overlap x,
 * w, norm_w or each other. Workspace: variant-defined.
 *
 * `wq` (plugin ABI 5) is the last member: NULL for F32 / BF16 weights.
 */
#ifndef NINFER_ABI_OPS_NORM_LINEAR_H
#define NINFER_ABI_OPS_NORM_LINEAR_H

#include <stdint.h>

#include "ninfer/abi/ops/quant_weight.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_NORM_LINEAR "norm_linear"

typedef struct ninfer_norm_linear_args {
  const float* x;
  int64_t x_row_stride;
  const float* norm_w;
  float eps;
  int32_t norm_offset; /* 0: scale by norm_w; 1: by 1 + norm_w */
  const void* w;
  int32_t w_dtype; /* ninfer_dtype */
  float* y;
  int64_t y_row_stride;
  float* normed; /* may be NULL */
  int64_t normed_row_stride;
  int64_t tokens;
  int32_t in_features;
  int32_t out_features;
  int32_t gated;
  const ninfer_quant_weight* wq; /* quantized w_dtype: scales, zeros, g_idx; NULL otherwise */
} ninfer_norm_linear_args;

#ifdef __cplusplus
}
#endif

#endif
