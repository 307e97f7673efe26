/* Op contract: argmax — greedy token selection on the device, so a greedy decode step moves
 * token ids to the host instead of whole logits rows.
 *
 * Math, for every row r in [0, rows):
 *   ids[r]      = the smallest j with logits[r, j] = max_k logits[r, k]   (ties: lowest id)
 *   logprob[r]  = logits[r, ids[r]] - log(sum_k exp(logits[r, k]))        (if logprob != NULL)
 * A row holding a NaN gives ids[r] = -1 (the caller reports it); -inf entries are allowed as
 * long as one entry is finite.
 *
 * Shapes: logits [rows, vocab] float32 with row stride row_stride; ids [rows] int32; logprob
 * [rows] float32 or NULL. Planning shape: tokens = rows, dims[0] = vocab, dtype = F32.
 * Effects: writes ids (and logprob) of the launch's rows. Workspace: variant-defined.
 */
#ifndef NINFER_ABI_OPS_ARGMAX_H
#define NINFER_ABI_OPS_ARGMAX_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_ARGMAX "argmax"

typedef struct ninfer_argmax_args {
  const float* logits;
  int64_t row_stride;
  int32_t* ids;
  float* logprob; /* may be NULL */
  int64_t rows;
  int32_t vocab;
} ninfer_argmax_args;

#ifdef __cplusplus
}
#endif

#endif
