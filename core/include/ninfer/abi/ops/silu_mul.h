/* Op contract: silu_mul — the activation of a SiLU-gated MLP (SwiGLU).
 *
 * For every token t and i in [0, width):
 *   out[t, i] = silu(gate[t, i]) * up[t, i],   silu(z) = z / (1 + exp(-z))
 * Rows are float32 at gate + t*gate_row_stride, up + t*up_row_stride, out + t*out_row_stride
 * (gate and up may be the two halves of one fused gate_up projection).
 * Planning shape: tokens = T, dims[0] = width, dtype = F32.
 *
 * Effects: writes out rows of the launch's tokens; out may be gate itself (same pointer and
 * stride), no other overlap. Workspace: none.
 */
#ifndef NINFER_ABI_OPS_SILU_MUL_H
#define NINFER_ABI_OPS_SILU_MUL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_SILU_MUL "silu_mul"

typedef struct ninfer_silu_mul_args {
  const float* gate;
  int64_t gate_row_stride;
  const float* up;
  int64_t up_row_stride;
  float* out;
  int64_t out_row_stride;
  int64_t tokens;
  int32_t width;
} ninfer_silu_mul_args;

#ifdef __cplusplus
}
#endif

#endif
