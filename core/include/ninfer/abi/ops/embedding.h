/* Op contract: embedding — gather rows of the token embedding table.
 *
 * Math, for every token t in [0, T):  out[t, :] = table[ids[t], :]   (converted to float32)
 *
 * Shapes: ids [T] int32, each in [0, vocab); table [vocab, dim] contiguous in `dtype` (F32 or
 * BF16); out [T, dim] float32 with row stride out_row_stride elements.
 * Planning shape: tokens = T, dims[0] = dim, dims[1] = vocab, dtype = the table's dtype.
 *
 * Effects: writes out rows of the launch's token range only. An id outside [0, vocab) is an
 * error (host variants return NINFER_ERR_INVALID_ARGUMENT); callers validate ids first.
 * Workspace: none.
 */
#ifndef NINFER_ABI_OPS_EMBEDDING_H
#define NINFER_ABI_OPS_EMBEDDING_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_EMBEDDING "embedding"

typedef struct ninfer_embedding_args {
  const int32_t* ids;
  const void* table;
  float* out;
  int64_t out_row_stride;
  int64_t tokens;
  int32_t vocab;
  int32_t dim;
  int32_t dtype; /* ninfer_dtype of table */
} ninfer_embedding_args;

#ifdef __cplusplus
}
#endif

#endif
