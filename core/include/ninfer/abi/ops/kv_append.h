/* The KV cache of one attention layer, and the op that writes it: kv_append.
 *
 * Cache layout (paged): k and v are each a pool of pool_blocks blocks, [pool_blocks,
 * block_tokens, kv_heads, head_dim] contiguous elements of cache.dtype: NINFER_DTYPE_F32
 * (float), NINFER_DTYPE_F16 (IEEE binary16) or NINFER_DTYPE_BF16 (bfloat16, the high half of a
 * float32). Each slot (one sequence) owns the blocks its row of the block table names:
 * block_table is [slots, blocks_per_slot] int32 block ids, and position p of slot s lives in
 * block b = block_table[s*blocks_per_slot + p/block_tokens], at row p % block_tokens. The row
 * of (slot s, position p, kv head h) starts at element
 *   ((b*block_tokens + p % block_tokens)*kv_heads + h)*head_dim.
 * capacity = blocks_per_slot * block_tokens is the most positions one slot can hold.
 * block_tokens is a power of two; a variant may refuse a block size (attention variants that
 * stage keys in tiles need every tile inside one block: see attention.h), and the caller
 * states the block size in the planning shape (ninfer_shape.kv_block_tokens) so the planner
 * never gives a variant one it refuses. The contiguous cache of earlier versions is the
 * identity table (block_table[s*blocks_per_slot + i] = s*blocks_per_slot + i, pool_blocks =
 * slots*blocks_per_slot), which is how a caller that wants every slot's full capacity builds
 * it.
 * The table lives where the kernels run: device memory for CUDA variants, host memory for host
 * ones. Only the entries of blocks that hold positions a call reads or writes must be valid ids
 * in [0, pool_blocks); the others are never read (a pool marks them -1). Host variants check the
 * entries they use (NINFER_ERR_INVALID_ARGUMENT); CUDA variants trust them (kv_append and
 * head_norm_rope_append skip a token whose entry lies outside the pool). A block id may appear in several slots'
 * rows (a shared prefix, read by each); the caller never appends into a block that another
 * live sequence reads. Tables are data, not launch constants: the caller may change entries
 * between launches (a captured CUDA graph then reads the new ones) as long as the pointer stays.
 * The pointers are void* for every dtype.
 * A slot holds one sequence; its positions [0, capacity) are written once each, in order, by
 * kv_append, and read by attention. Memory is the caller's, sized up front.
 *
 * kv_append, for every token t of sequence i = batch.token_seq[t], slot s = batch.seq_slot[i],
 * p = batch.token_pos[t], and kv head h:
 *   cache.k[s, p, h, :] = round(k[t, h, :])      cache.v[s, p, h, :] = round(v[t, h, :])
 * (cache.k[s, p, h, :]: the row of (s, p, h) through the block table, as above)
 * where round is the identity for F32 and round-to-nearest-even into the cache dtype for F16
 * and BF16 (F16: |x| >= 65520, past the largest half 65504, becomes infinite, as a float -> half
 * conversion does; NaN stays NaN).
 * k and v head rows are head_dim float32 at k + t*k_token_stride + h*head_dim (v likewise).
 * Planning shape: tokens = T, dims[0] = head_dim, dims[1] = kv_heads, dtype = cache dtype
 * (a variant's dtype_mask says which cache dtypes it writes), kv_block_tokens = block_tokens.
 *
 * Effects: writes only the cache rows of the launch's tokens, each in the block its slot's table
 * names: a sequence's writes never touch a block its table does not name. p >= capacity, a slot
 * outside [0, slots) or a table entry outside [0, pool_blocks) is an error (host variants
 * return NINFER_ERR_INVALID_ARGUMENT). Workspace: none.
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
  int32_t capacity; /* positions one slot can hold: blocks_per_slot * block_tokens */
  int32_t kv_heads;
  int32_t head_dim;
  int32_t dtype; /* ninfer_dtype of the elements: F32, F16 or BF16 */
  const int32_t* block_table; /* [slots, blocks_per_slot] block ids (device memory for CUDA) */
  int32_t block_tokens;       /* positions per block, a power of two */
  int32_t blocks_per_slot;
  int32_t pool_blocks;        /* blocks in k and in v */
} ninfer_kv_cache;

/* The first element of the row of (slot, pos, kv head 0), or -1 when the slot, the position or
 * its table entry lies outside the cache: the one address rule of host code. */
#ifndef __CUDACC_RTC__
static inline int64_t ninfer_kv_cache_row(const ninfer_kv_cache* c, int32_t slot, int32_t pos) {
  if (slot < 0 || slot >= c->slots || pos < 0 || pos >= c->capacity || c->block_tokens <= 0) return -1;
  const int32_t block = c->block_table[(int64_t)slot * c->blocks_per_slot + pos / c->block_tokens];
  if (block < 0 || block >= c->pool_blocks) return -1;
  return ((int64_t)block * c->block_tokens + pos % c->block_tokens) * c->kv_heads * c->head_dim;
}

/* NULL when the layout fields agree (block_tokens a power of two, capacity = blocks_per_slot *
 * block_tokens, a table), else what is wrong: every plugin's launch checks the same rule. */
static inline const char* ninfer_kv_cache_layout_error(const ninfer_kv_cache* c) {
  if (!c->block_table) return "the cache has no block table";
  if (c->block_tokens <= 0 || (c->block_tokens & (c->block_tokens - 1)))
    return "block_tokens must be a power of two";
  if (c->blocks_per_slot <= 0 || (int64_t)c->blocks_per_slot * c->block_tokens != c->capacity)
    return "capacity must be blocks_per_slot * block_tokens";
  if (c->pool_blocks <= 0) return "the pool has no blocks";
  return 0;
}
#endif

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
