/* Op contract: copy_rows — rows of 32-bit words copied between buffers at indices the device
 * holds, so a step can move state chosen by an earlier op (the draft position a speculative
 * round accepted: docs/speculative.md) without the host reading it.
 *
 * Math, for every row r in [0, rows) and word c in [0, width):
 *   dst[d * dst_stride + c] = src[s * src_stride + c]
 *   d = dst_index[r] (r when dst_index is NULL),  s = src_index[r] (r when src_index is NULL)
 * Words are copied as bits (float32 and int32 rows alike).
 *
 * Groups: with groups > 1 the call repeats the copy for every g in [0, groups) between the
 * buffers dst_groups[g] and src_groups[g] (device arrays of base pointers) with the same
 * indices, strides and width; dst and src are then unused. One call thus settles the same state
 * of every layer of a model (docs/speculative.md), where a call per layer would pay a launch per
 * layer for a copy too small to reach the memory's rate. groups 0 or 1: the one pair dst, src.
 *
 * Shapes: dst and src 32-bit words with row strides dst_stride, src_stride (in words, >= width);
 * dst_index, src_index [rows] int32 or NULL. Planning shape: tokens = rows, dims[0] = width,
 * dtype = F32 (the words' size).
 *
 * Ordering: the indices (and src) may be written by the op launched right before this one (a
 * speculative round's acceptance computes them): a variant reads them, and the group arrays,
 * after its launch wait.
 *
 * Effects: writes the dst rows named. Two rows of one call naming the same dst row (in one
 * group's buffer), or a dst row overlapping a src row of the call (of any group), leave it
 * unspecified. Workspace: none.
 */
#ifndef NINFER_ABI_OPS_COPY_ROWS_H
#define NINFER_ABI_OPS_COPY_ROWS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_COPY_ROWS "copy_rows"

typedef struct ninfer_copy_rows_args {
  void* dst;
  int64_t dst_stride;
  const int32_t* dst_index; /* may be NULL: row r */
  const void* src;
  int64_t src_stride;
  const int32_t* src_index; /* may be NULL: row r */
  int64_t rows;
  int64_t width;
  int64_t groups;                /* 0 or 1: dst and src; more: the group arrays below */
  void* const* dst_groups;       /* [groups] base pointers (groups > 1), else NULL */
  const void* const* src_groups; /* [groups] base pointers (groups > 1), else NULL */
} ninfer_copy_rows_args;

#ifdef __cplusplus
}
#endif

#endif
