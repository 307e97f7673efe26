/* Op contract: conv_l2_norm — causal_conv1d followed by l2_norm of its first heads: the
 * part of a Gated DeltaNet layer between its input projection and the delta rule, in one op.
 *
 * Exactly causal_conv1d (ninfer/abi/ops/causal_conv1d.h) with the arguments in `conv`, then,
 * for every token t and head h < norm_heads, the output row r of norm_dim channels starting
 * at channel h * norm_dim:
 *   r = r * rsqrt(sum(r^2) + eps)                  (l2_norm's formula, ninfer/abi/ops/l2_norm.h)
 * Channels from norm_heads * norm_dim on are the convolution's output unchanged. Qwen3.5 passes
 * q and k (2 * k_heads heads of k_dim) as the normed heads and v after them.
 *
 * Shapes: as causal_conv1d's; norm_heads * norm_dim <= channels.
 * Planning shape: tokens = T, dims[0] = channels, dims[1] = kernel, dims[2] = the most tokens
 * of one sequence in the call (1 for a decode step), dims[3] = norm_dim, dtype = F32.
 *
 * Effects: causal_conv1d's (out for the batch's tokens, the state of the batch's slots, and
 * conv.token_states when given: a variant that does not write them refuses shapes with
 * NINFER_SHAPE_TOKEN_STATES, and the core runs causal_conv1d and l2_norm); a launch covers
 * whole sequences. Workspace: none.
 */
#ifndef NINFER_ABI_OPS_CONV_L2_NORM_H
#define NINFER_ABI_OPS_CONV_L2_NORM_H

#include <stdint.h>

#include "ninfer/abi/ops/causal_conv1d.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_CONV_L2_NORM "conv_l2_norm"

typedef struct ninfer_conv_l2_norm_args {
  ninfer_causal_conv1d_args conv;
  int32_t norm_heads;
  int32_t norm_dim;
  float eps;
} ninfer_conv_l2_norm_args;

#ifdef __cplusplus
}
#endif

#endif
