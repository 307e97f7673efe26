// How the kernels that write the KV cache (pointwise/kv_append.cu, pointwise/head_norm_rope.cu's
// append form) place a token's rows and round its values (contract: ninfer/abi/ops/kv_append.h):
// one copy of the rule, so both writers agree on where a row goes, which tokens are skipped and the
// rounding.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "ninfer/abi/ops/kv_append.h"

namespace ninfer::cuda_plugin {

// A float32 value as a KV cache element: round to nearest even for 16-bit caches.
__device__ __forceinline__ void to_cache(float x, float& out) { out = x; }
__device__ __forceinline__ void to_cache(float x, __half& out) { out = __float2half_rn(x); }
__device__ __forceinline__ void to_cache(float x, __nv_bfloat16& out) { out = __float2bfloat16_rn(x); }

// The first element of token t's cache row (kv head 0 of its slot and position, through the slot's
// block table), or -1 when the slot, the position or its table entry lies outside the cache: a
// kernel cannot report that, so such a token is skipped rather than written out of bounds
// (callers validate the batch and the table first).
__device__ __forceinline__ int64_t kv_token_row(const ninfer_kv_cache& c, const ninfer_token_batch& b, int64_t t) {
  const int32_t slot = b.seq_slot[b.token_seq[t]];
  const int32_t pos = b.token_pos[t];
  if (slot < 0 || slot >= c.slots || pos < 0 || pos >= c.capacity || c.block_tokens <= 0) return -1;
  const int32_t block = c.block_table[static_cast<int64_t>(slot) * c.blocks_per_slot + pos / c.block_tokens];
  if (block < 0 || block >= c.pool_blocks) return -1;
  return (static_cast<int64_t>(block) * c.block_tokens + pos % c.block_tokens) * c.kv_heads * c.head_dim;
}

} // namespace ninfer::cuda_plugin
