/* Op contract: head_norm_rope_append — head_norm_rope of q and k, then kv_append of the
 * resulting k rows and the v rows, in one call.
 *
 * Exactly head_norm_rope(rope) (head_norm_rope.h), then kv_append(append) (kv_append.h), with
 * append.k the k rows head_norm_rope just rewrote: append.k == rope.k, append.k_token_stride
 * == rope.k_token_stride, the k head rows contiguous (rope.k_head_stride == head_dim), and
 * append.cache.kv_heads == rope.k_heads, append.cache.head_dim == rope.head_dim,
 * append.tokens == rope.tokens, append.batch.token_pos == rope.positions.
 * A plugin fuses them so that an attention layer's decode step writes its new K and V cache
 * rows in the launch that normalises and rotates them: one latency-bound launch fewer per
 * layer (docs/ops.md).
 * Planning shape: tokens = T, dims[0] = head_dim, dims[1] = q_heads, dims[2] = k_heads,
 * dims[3] = rotary_dim, dtype = the cache dtype (F32, F16 or BF16), kv_block_tokens = the
 * cache's block_tokens. The cache rows go where its block table says (kv_append.h).
 *
 * Effects: those of the two ops: the q and k head rows of the launch's tokens are rewritten,
 * and their cache rows written. Workspace: none. Ordering: head_norm_rope's, and the batch
 * arrays likewise (token_batch.h).
 */
#ifndef NINFER_ABI_OPS_HEAD_NORM_ROPE_APPEND_H
#define NINFER_ABI_OPS_HEAD_NORM_ROPE_APPEND_H

#include <stdint.h>

#include "ninfer/abi/ops/head_norm_rope.h"
#include "ninfer/abi/ops/kv_append.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_HEAD_NORM_ROPE_APPEND "head_norm_rope_append"

typedef struct ninfer_head_norm_rope_append_args {
  ninfer_head_norm_rope_args rope;
  ninfer_kv_append_args append;
} ninfer_head_norm_rope_append_args;

/* NULL when the ties above hold, else what breaks them: every plugin checks the same rule on
 * the host (NVRTC, which compiles device code only, does not see it). */
#ifndef __CUDACC_RTC__
static inline const char* ninfer_head_norm_rope_append_untied(const ninfer_head_norm_rope_append_args* a) {
  const ninfer_head_norm_rope_args* r = &a->rope;
  const ninfer_kv_append_args* k = &a->append;
  if (k->k != r->k || k->k_token_stride != r->k_token_stride || r->k_head_stride != r->head_dim)
    return "append.k must be rope.k, with contiguous head rows";
  if (k->cache.kv_heads != r->k_heads || k->cache.head_dim != r->head_dim || k->tokens != r->tokens ||
      k->batch.token_pos != r->positions)
    return "append's cache heads, head_dim, tokens and positions must be rope's";
  return 0;
}
#endif

#ifdef __cplusplus
}
#endif

#endif
