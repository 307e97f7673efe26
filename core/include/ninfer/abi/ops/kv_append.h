/* The KV cache of one attention layer, and the op that writes it: kv_append.
 *
 * Cache layout: k and v are each [slots, capacity, kv_heads, head_dim] contiguous elements of
 * cache.dtype: NINFER_DTYPE_F32 (float), NINFER_DTYPE_F16 (IEEE binary16) or NINFER_DTYPE_BF16
 * (bfloat16, the high half of a float32); the row of (slot s, position p, kv head h) starts at
 * element ((s*capacity + p)*kv_heads + h)*head_dim. The pointers are void* for every dtype (the
 * struct's layout is the one of the float32-only version: no ABI bump; a plugin built before
 * 16-bit caches declares F32 only in its variants' dtype_mask, so the planner never gives it
 * another dtype).
 * A slot holds one sequence; its positions [0, capacity) are written once each, in order, by
 * kv_append, and read by attention. Memory is the caller's, sized up front.
 *
 * kv_append, for every token t of sequence i = batch.token_seq[t], slot s = batch.seq_slot[i],
 * p = batch.token_pos[t], and kv head h:
 *   cache.k[s, p, h, :] = round(k[t, h, :])      cache.v[s, p, h, :] = round(v[t, h, :])
 * where round is the identity for F32 and round-to-nearest-even into the cache dtype for F16
 * and BF16 (F16: |x| >= 65520, past the largest half 65504, becomes infinite, as a float -> half
 * conversion does; NaN stays NaN).
 * k and v head rows are head_dim float32 at k + t*k_token_stride + h*head_dim (v likewise).
 * Planning shape: tokens = T, dims[0] = head_dim, dims[1] = kv_heads, dtype = cache dtype
 * (a variant's dtype_mask says which cache dtypes it writes).
 *
 * Effects: writes only the cache rows of the launch's tokens. p >= capacity or a slot outside
 * [0, slots) is an error (host variants return NINFER_ERR_INVALID_ARGUMENT). Workspace: none.
 */
#ifndef NINFER_ABI_OPS_KV_APPEND_H
#define NINFER_ABI_OPS_KV_APPEND_H

#include <stdint.h>

#include "ninfer/abi/ops/token_batch.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_KV_APPEND "kv_append"

typedef struct ninfer_kv_cache {
  void* k; /* elements of `dtype` */
  void* v;
  int32_t slots;
  int32_t capacity; /* positions per slot (max context) */
  int32_t kv_heads;
  int32_t head_dim;
  int32_t dtype; /* ninfer_dtype of the elements: F32, F16 or BF16 */
} ninfer_kv_cache;

typedef struct ninfer_kv_append_args {
  const float* k;
  int64_t k_token_stride;
  const float* v;
  int64_t v_token_stride;
  ninfer_kv_cache cache;
  ninfer_token_batch batch;
  int64_t tokens;
} ninfer_kv_append_args;

#ifdef __cplusplus
}
#endif

#endif
