/* Op contract: attention — causal grouped-query attention of new tokens over a KV cache
 * (prefill chunks and decode steps alike).
 *
 * For every token t of sequence i = batch.token_seq[t] (slot s = batch.seq_slot[i], position
 * p = batch.token_pos[t]) and query head h, with kv head g = h / (heads / kv_heads):
 *   score[j] = scale * dot(q[t, h, :], cache.k[s, j, g, :])     for j in [0, p]
 *   w        = softmax(score)                                    (max-subtracted)
 *   out[t, h, :] = sum_j w[j] * cache.v[s, j, g, :]
 * (cache.k[s, j, g, :]: the row of (s, j, g) through the slot's block table, kv_append.h.)
 * Positions [0, p] of the slot must already be in the cache: run kv_append for this call's
 * tokens first, and the table entries of blocks 0 .. p / block_tokens must name them. A token
 * never sees positions after its own (causal), nor a block its slot's table does not name.
 *
 * Shapes: q head rows are head_dim float32 at q + t*q_token_stride + h*q_head_stride; out is
 * [T, heads, head_dim] float32 with row stride out_token_stride (heads contiguous); heads is a
 * multiple of kv_heads. Softmax and both products accumulate in float32 or wider.
 * The cache's elements (cache.dtype F32, F16 or BF16; layout in kv_append.h) are read as the
 * float32 values they represent (widening F16 and BF16 is exact); q and out are float32 for
 * every cache dtype. A compact cache (KV_INT8, KV_FP8, KV_INT4R) is read as the values
 * kv_append.h says its codes and scales represent, dequantized where they are used (no second
 * copy); for KV_INT4R the keys hold k' = H k, and a variant computes the score as
 * dot(H q, k') (equal to dot(q, H k') since H is symmetric and orthogonal), the rotation of q
 * in float32 or wider. Tolerance of a compact variant against the reference: float32
 * accumulation over the same dequantized values.
 * Planning shape: tokens = T, dims[0] = head_dim, dims[1] = heads, dims[2] = kv_heads,
 * dims[3] = the longest attended span in this call (max p + 1), dtype = cache dtype (a
 * variant's dtype_mask says which cache dtypes it reads), kv_block_tokens = the cache's
 * block_tokens.
 * Block sizes: a variant that stages keys in tiles reads each tile through one table entry, so
 * it needs every tile inside one block; it refuses in `supports` a kv_block_tokens it cannot
 * take (0 in the shape: not stated; its launch still checks the cache). The CUDA plugins'
 * variants take every power of two >= NINFER_ATTENTION_TILE_BLOCK_TOKENS (their key tiles are
 * 16 or 32 keys, each starting at a multiple of its size; split-KV chunks start at multiples
 * of 32); the CPU reference takes every power of two.
 *
 * Ordering: a variant may read the batch arrays (token_batch.h), the block table and each
 * sequence's cache rows before its first position in this call while the kernel launched before
 * it on the stream still runs (programmatic dependent launch): like the batch arrays, the table
 * is uploaded before the step, never written by a kernel. So the kernel (or op) that runs right before the
 * attention must not write those rows; the KV writers write this call's positions only.
 *
 * Effects: writes out rows of the launch's tokens; reads the cache only. Workspace:
 * variant->workspace_bytes(shape, tokens), caller-owned.
 */
#ifndef NINFER_ABI_OPS_ATTENTION_H
#define NINFER_ABI_OPS_ATTENTION_H

#include <stdint.h>

#include "ninfer/abi/ops/kv_append.h"
#include "ninfer/abi/ops/token_batch.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_ATTENTION "attention"

/* The smallest block size every tiled attention variant of the CUDA plugins takes, and the
 * smallest the core plans: the largest key tile (32 keys). */
#define NINFER_ATTENTION_TILE_BLOCK_TOKENS 32

typedef struct ninfer_attention_args {
  const float* q;
  int64_t q_token_stride;
  int64_t q_head_stride;
  ninfer_kv_cache cache; /* read only */
  ninfer_token_batch batch;
  float* out;
  int64_t out_token_stride;
  int64_t tokens;
  int32_t heads;
  float scale; /* 1/sqrt(head_dim) for Qwen */
} ninfer_attention_args;

#ifdef __cplusplus
}
#endif

#endif
