/* Op contract: linear — a bias-free dense layer, y = x . W^T (or y += x . W^T).
 *
 * Math, for every token t in [0, T) and output n in [0, out_features):
 *   accumulate == 0:  y[t, n]  = sum_k x[t, k] * w[n, k]   (y's previous contents are ignored)
 *   accumulate != 0:  y[t, n] += sum_k x[t, k] * w[n, k]   (y's previous value is added, in float32,
 *                     after the dot product; a transformer's o_proj / down_proj update the residual
 *                     stream in place this way, with no separate add kernel)
 *
 * Shapes: x [T, in_features] float32 with row stride x_row_stride; w [out_features,
 * in_features] contiguous (PyTorch nn.Linear layout) in w_dtype; y [T, out_features] float32
 * with row stride y_row_stride. Accumulation is float32 or wider.
 * Weight dtypes: F32 or BF16 (w holds the elements; wq is NULL), or a quantized dtype (INT4,
 * INT8, FP8_E4M3): w holds the codes and wq the rest of the matrix in the canonical layout of
 * ninfer/abi/ops/quant_weight.h, and w[n, k] above is its dequantized weight, exact in float32.
 * A variant takes the dtypes its dtype_mask names; the planner never routes a call to one that
 * does not take its w_dtype.
 * Planning shape: tokens = T, dims[0] = in_features, dims[1] = out_features, dtype = w_dtype,
 * dims[2] = ninfer_quant_planning_group(wq) (the group size of quantized weights without g_idx;
 * 0 for float weights and for a g_idx mapping), dims[3] = ninfer_quant_planning_layout(wq) (the
 * codes' layout: a variant that reads row-major codes only refuses NINFER_QUANT_LAYOUT_TILES16).
 *
 * Effects: writes y rows of the launch's tokens; y must not overlap x or w. With accumulate, y
 * is read and then written, each element by the same thread (or library call) that writes it, so
 * updating y in place is safe; nothing else may write y during the launch. Workspace: none.
 *
 * `accumulate` (plugin ABI 3) and `wq` (ABI 5) are the last members: aggregate initializers
 * that leave them out value-initialise them to 0 and NULL, a plain y = x . W^T of float weights.
 */
#ifndef NINFER_ABI_OPS_LINEAR_H
#define NINFER_ABI_OPS_LINEAR_H

#include <stdint.h>

#include "ninfer/abi/ops/quant_weight.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_LINEAR "linear"

typedef struct ninfer_linear_args {
  const float* x;
  int64_t x_row_stride;
  const void* w;
  float* y;
  int64_t y_row_stride;
  int64_t tokens;
  int32_t in_features;
  int32_t out_features;
  int32_t w_dtype;    /* ninfer_dtype */
  int32_t accumulate; /* nonzero: y += x . W^T; 0: y = x . W^T */
  const ninfer_quant_weight* wq; /* quantized w_dtype: scales, zeros, g_idx; NULL otherwise */
} ninfer_linear_args;

#ifdef __cplusplus
}
#endif

#endif
