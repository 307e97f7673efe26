/* Op contract: head_norm_rope_append_attention — a decode step's attention layer after its
 * projection: head_norm_rope_append, then attention over the cache it just appended to, in one
 * call.
 *
 * Exactly head_norm_rope_append(prep) (head_norm_rope_append.h), then attention(attn)
 * (attention.h), where attn reads the q rows prep rotated and the cache prep appended to:
 * attn.q == prep.rope.q with its strides, attn.heads == prep.rope.q_heads, attn.cache ==
 * prep.append.cache, attn.batch == prep.append.batch, attn.tokens == prep.rope.tokens. Every
 * sequence of the call has exactly one token (a decode step; prompt chunks run the two ops).
 * The q and k head rows' values after the call are unspecified: a plugin may keep the rotated
 * rows in registers and never write them back. The cache rows and out are as the two ops leave
 * them, within each op's own precision.
 * A plugin fuses them so that the new query meets the cache in the launch that normalises and
 * rotates it: one latency-bound launch fewer per attention layer (docs/ops.md).
 * Planning shape: attention's (tokens = T, dims[0] = head_dim, dims[1] = heads, dims[2] =
 * kv_heads, dims[3] = the longest attended span), dtype = the cache dtype, kv_block_tokens = the
 * cache's block_tokens (a variant refuses the block sizes attention.h lets it), max_seq_tokens = the
 * most tokens of one sequence where the caller states it: a plugin variant is planned only when
 * it is 0 or 1, and the core runs the two ops otherwise.
 *
 * Ordering: both ops' (a variant may read the batch arrays, positions, weights and the cache
 * rows before each sequence's position while the kernel before it still runs).
 * Effects: the two ops'. Workspace: variant->workspace_bytes(shape, tokens), caller-owned.
 */
#ifndef NINFER_ABI_OPS_HEAD_NORM_ROPE_APPEND_ATTENTION_H
#define NINFER_ABI_OPS_HEAD_NORM_ROPE_APPEND_ATTENTION_H

#include <stdint.h>

#include "ninfer/abi/ops/attention.h"
#include "ninfer/abi/ops/head_norm_rope_append.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION "head_norm_rope_append_attention"

typedef struct ninfer_head_norm_rope_append_attention_args {
  ninfer_head_norm_rope_append_args prep;
  ninfer_attention_args attn;
} ninfer_head_norm_rope_append_attention_args;

/* NULL when the ties above hold (head_norm_rope_append's and the attention's), else what breaks
 * them. Host side only, as head_norm_rope_append's check. */
#ifndef __CUDACC_RTC__
static inline const char* ninfer_head_norm_rope_append_attention_untied(
    const ninfer_head_norm_rope_append_attention_args* a) {
  const ninfer_head_norm_rope_args* r = &a->prep.rope;
  const ninfer_kv_cache* pc = &a->prep.append.cache;
  const ninfer_kv_cache* ac = &a->attn.cache;
  const ninfer_token_batch* pb = &a->prep.append.batch;
  const ninfer_token_batch* ab = &a->attn.batch;
  const char* why = ninfer_head_norm_rope_append_untied(&a->prep);
  if (why) return why;
  if (a->attn.q != r->q || a->attn.q_token_stride != r->q_token_stride || a->attn.q_head_stride != r->q_head_stride ||
      a->attn.heads != r->q_heads || a->attn.tokens != r->tokens)
    return "attn's q rows, heads and tokens must be prep's";
  if (ac->k != pc->k || ac->v != pc->v || ac->slots != pc->slots || ac->capacity != pc->capacity ||
      ac->kv_heads != pc->kv_heads || ac->head_dim != pc->head_dim || ac->dtype != pc->dtype ||
      ac->block_table != pc->block_table || ac->block_tokens != pc->block_tokens ||
      ac->blocks_per_slot != pc->blocks_per_slot || ac->pool_blocks != pc->pool_blocks)
    return "attn's cache must be the one prep appends to";
  if (ab->num_seqs != pb->num_seqs || ab->seq_start != pb->seq_start || ab->seq_slot != pb->seq_slot ||
      ab->token_pos != pb->token_pos || ab->token_seq != pb->token_seq)
    return "attn's batch must be prep's";
  return 0;
}
#endif

#ifdef __cplusplus
}
#endif

#endif
