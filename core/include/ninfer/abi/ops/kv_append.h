/* The KV cache of one attention layer, and the op that writes it: kv_append.
 *
 * Cache layout: k and v are each [slots, capacity, kv_heads, head_dim] contiguous float32;
 * the row of (slot s, position p, kv head h) starts at ((s*capacity + p)*kv_heads + h)*head_dim.
 * A slot holds one sequence; its positions [0, capacity) are written once each, in order, by
 * kv_append, and read by attention. Memory is the caller's, sized up front.
 *
 * kv_append, for every token t of sequence i = batch.token_seq[t], slot s = batch.seq_slot[i],
 * p = batch.token_pos[t], and kv head h:
 *   cache.k[s, p, h, :] = k[t, h, :]      cache.v[s, p, h, :] = v[t, h, :]
 * k and v head rows are head_dim float32 at k + t*k_token_stride + h*head_dim (v likewise).
 * Planning shape: tokens = T, dims[0] = head_dim, dims[1] = kv_heads, dtype = cache dtype (F32).
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
  float* k;
  float* v;
  int32_t slots;
  int32_t capacity; /* positions per slot (max context) */
  int32_t kv_heads;
  int32_t head_dim;
  int32_t dtype; /* ninfer_dtype; F32 in this version */
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
