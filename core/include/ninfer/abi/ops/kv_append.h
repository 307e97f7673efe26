/* The KV cache of one attention layer, and the op that writes it: kv_append.
 *
 * Cache layout (paged): k and v are each a pool of pool_blocks blocks, [pool_blocks,
 * block_tokens, kv_heads, head_dim] contiguous elements of cache.dtype: NINFER_DTYPE_F32
 * (float), NINFER_DTYPE_F16 (IEEE binary16) or NINFER_DTYPE_BF16 (bfloat16, the high half of a
 * float32), or codes of a compact format (below). Each slot (one sequence) owns the blocks its row of the block table names:
 * block_table is [slots, blocks_per_slot] int32 block ids, and position p of slot s lives in
 * block b = block_table[s*blocks_per_slot + p/block_tokens], at row p % block_tokens. The head
 * row of (slot s, position p, kv head h) is row r = (b*block_tokens + p % block_tokens)*kv_heads
 * + h of the pool; its elements start at element r*head_dim. That row index is the one address
 * rule of the cache: a compact format's scales are indexed by r too.
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
 * Compact formats (k_scale and v_scale point at their scales; NULL for F32, F16 and BF16).
 * Quantization is per head row; x is the float32 row being written, G = head_dim / 64 groups
 * of 64 consecutive elements (group g holds elements [64g, 64g + 64)). Divisions are float32,
 * correctly rounded; rint rounds half to even; fp16(y) rounds a float32 to IEEE binary16
 * (nearest even). A group (KV_FP8: a row) holding a NaN or infinite element, or whose fp16
 * scale rounds past 65504, gets a NaN scale (its elements read as NaN, never as a finite value).
 *   NINFER_DTYPE_KV_INT8: head_dim a multiple of 64. Codes are int8 (two's complement), one
 *     byte per element at byte r*head_dim + d. Scales are fp16 bit patterns (uint16_t),
 *     scale[r*G + g] = s = fp16(max_{d in g} |x_d| / 127); code q_d = clamp(rint(x_d / s),
 *     -127, 127), 0 when s = 0. The element reads as q_d * s (exact in float32). A group
 *     whose absmax is below 127 * 2^-14 ~ 0.0078 gets a subnormal fp16 scale: fewer
 *     significant bits, so its largest elements may clamp (an error above half a step, still
 *     below 2^-14 * 127 * 2^-10 in absolute terms).
 *   NINFER_DTYPE_KV_FP8: codes are float8 e4m3fn (1 sign, 4 exponent bits of bias 7, 3
 *     mantissa bits, no infinities), one byte per element at byte r*head_dim + d. One float32
 *     scale per row, scale[r] = s, the least-error candidate (below) among
 *     c_i = max_d |x_d| / (448 - 14 i), i < NINFER_KV_FP8_SCALE_CANDIDATES; code
 *     e_d = e4m3(x_d / s), rounded to nearest even and saturated to +-448 (the satfinite
 *     conversion), 0 when s = 0. The element reads as the float32 product e4m3_value(e_d) * s
 *     (one rounding). The scale is float32 rather than fp16 because a row whose
 *     absmax is below 448 * 2^-14 ~ 0.027 would get a subnormal fp16 scale (fewer significant
 *     bits, down to none), and small K/V rows are common after RMS-normed heads; float32 costs 4 bytes per row, 2% of
 *     a 128-wide fp8 row (1% at 256).
 *   NINFER_DTYPE_KV_INT4R: head_dim a power of two and a multiple of 64 (64, 128, 256, 512).
 *     Codes are 4-bit, two per byte at byte (r*head_dim + d) / 2, even d in the low nibble,
 *     each nibble q_d + 8 (q_d in [-8, 7]). Scales are fp16 bit patterns, one per group: s,
 *     the least-error candidate among c_i = fp16(max_{d in g} |y_d| / (7 + i/4)),
 *     i < NINFER_KV_INT4_SCALE_CANDIDATES; q_d = clamp(rint(y_d / s), -8, 7), 0 when s = 0. A
 *     group whose c_0 rounds past 65504 gets a NaN scale. For v, y = x. For
 *     k, y = H x, the row rotated by the normalized Hadamard matrix of order n = head_dim,
 *     H[i][j] = (-1)^popcount(i & j) / sqrt(n) (symmetric and orthogonal: H H = I), computed in
 *     float32 in any order (so y, and the codes, may differ from exact arithmetic by float32
 *     rounding: a code only where y_d / s lies that close to a half-integer). The rotation
 *     spreads an outlier channel over the whole row, so one group's scale no longer serves one
 *     large element and 63 small ones. A value element reads as q_d * s; a key row reads as
 *     H k' with k'_d = q_d * s, which attention computes as dot(H q, k') (attention.h).
 * Least-error scale: of the candidates, the one whose codes give the smallest sum of squared
 * errors over the row (KV_FP8) or group (KV_INT4R), the first on a tie. The error of element d
 * is the float32 difference e_d = (its decoded float32 value) - y_d (x_d for KV_FP8); e_d^2 is
 * taken exactly in double and added, in double, into partial d % 32 in increasing d; the 32
 * partials p_l then meet in five steps, off = 16, 8, 4, 2, 1, each p_l = p_l + p_(l xor off),
 * and p_0 is the sum. Every plugin sums in this order, so every plugin picks the same scale.
 * (docs/kv-cache.md measures what the search buys against absmax / 448 and absmax / 7.)
 * Bytes per head row: head_dim * 4 / 2 / 2 (F32 / F16, BF16), head_dim + 2G (KV_INT8),
 * head_dim + 4 (KV_FP8), head_dim / 2 + 2G (KV_INT4R); the scale arrays hold G (KV_FP8: 1)
 * entries per row, pool_blocks*block_tokens*kv_heads rows, for k and for v.
 * A format is a room for more (2-bit values, other group sizes): a new dtype value with its
 * paragraph here, the same row index, and a scale array per tensor.
 *
 * A slot holds one sequence; its positions [0, capacity) are written once each, in order, by
 * kv_append, and read by attention. Memory is the caller's, sized up front.
 *
 * kv_append, for every token t of sequence i = batch.token_seq[t], slot s = batch.seq_slot[i],
 * p = batch.token_pos[t], and kv head h:
 *   cache.k[s, p, h, :] = round(k[t, h, :])      cache.v[s, p, h, :] = round(v[t, h, :])
 * (cache.k[s, p, h, :]: the row of (s, p, h) through the block table, as above)
 * where round is the identity for F32 and round-to-nearest-even into the cache dtype for F16
 * and BF16 (F16: |x| >= 65520, past the largest half 65504, becomes infinite, as a float -> half
 * conversion does; NaN stays NaN), and the quantization above (codes and scales of the row)
 * for the compact formats.
 * k and v head rows are head_dim float32 at k + t*k_token_stride + h*head_dim (v likewise).
 * Planning shape: tokens = T, dims[0] = head_dim, dims[1] = kv_heads, dtype = cache dtype
 * (a variant's dtype_mask says which cache dtypes it writes; a head_dim a compact format does
 * not take is refused by supports()), kv_block_tokens = block_tokens.
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
#include "ninfer/abi/plugin_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_OP_KV_APPEND "kv_append"

#define NINFER_KV_GROUP 64 /* elements per scale of KV_INT8 and KV_INT4R */
#define NINFER_KV_FP8_SCALE_CANDIDATES 16 /* KV_FP8's least-error search: absmax / (448 - 14 i) */
#define NINFER_KV_INT4_SCALE_CANDIDATES 5 /* KV_INT4R's: fp16(absmax / (7 + i/4)) */

typedef struct ninfer_kv_cache {
  void* k; /* elements of `dtype` */
  void* v;
  int32_t slots;
  int32_t capacity; /* positions one slot can hold: blocks_per_slot * block_tokens */
  int32_t kv_heads;
  int32_t head_dim;
  int32_t dtype; /* ninfer_dtype of the elements: F32, F16, BF16, KV_INT8, KV_FP8 or KV_INT4R */
  void* k_scale;  /* the compact formats' scales (fp16 bits; KV_FP8: float32); else NULL */
  void* v_scale;
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

#ifndef __CUDACC_RTC__
/* Whether `dtype` is one of the compact formats (it has scale arrays). */
static inline int ninfer_kv_dtype_is_compact(int32_t dtype) {
  return dtype == NINFER_DTYPE_KV_INT8 || dtype == NINFER_DTYPE_KV_FP8 || dtype == NINFER_DTYPE_KV_INT4R;
}

/* Whether a cache of `dtype` can have rows of `head_dim` elements (the formats' rules above). */
static inline int ninfer_kv_dtype_takes_head_dim(int32_t dtype, int64_t head_dim) {
  if (head_dim <= 0) return 0;
  if (dtype == NINFER_DTYPE_KV_INT8) return head_dim % NINFER_KV_GROUP == 0;
  if (dtype == NINFER_DTYPE_KV_INT4R) return head_dim % NINFER_KV_GROUP == 0 && (head_dim & (head_dim - 1)) == 0;
  return 1;
}

/* Bytes of one head row's elements (codes) in a cache of `dtype`; 0 for an unknown dtype. */
static inline int64_t ninfer_kv_row_bytes(int32_t dtype, int64_t head_dim) {
  switch (dtype) {
    case NINFER_DTYPE_F32: return 4 * head_dim;
    case NINFER_DTYPE_F16:
    case NINFER_DTYPE_BF16: return 2 * head_dim;
    case NINFER_DTYPE_KV_INT8:
    case NINFER_DTYPE_KV_FP8: return head_dim;
    case NINFER_DTYPE_KV_INT4R: return head_dim / 2;
    default: return 0;
  }
}

/* Bytes of one head row's scales (0 for F32, F16, BF16). */
static inline int64_t ninfer_kv_row_scale_bytes(int32_t dtype, int64_t head_dim) {
  if (dtype == NINFER_DTYPE_KV_FP8) return 4;
  if (dtype == NINFER_DTYPE_KV_INT8 || dtype == NINFER_DTYPE_KV_INT4R) return 2 * (head_dim / NINFER_KV_GROUP);
  return 0;
}
#endif

#ifdef __cplusplus
}
#endif

#endif
