// Shape rules shared by the attention kernels (attention/prefill.cu, attention/decode.cu) and
// their variant tables: tile sizes, head-dim classes, which shapes the split-KV decode serves,
// and the decode workspace. Host and device code both include it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ninfer/abi/ops/attention.h"
#include "ninfer/abi/plugin_abi.h"

#ifndef __CUDACC__
#define NINFER_HD_FN inline
#else
#define NINFER_HD_FN __host__ __device__ inline
#endif

namespace ninfer::cuda_plugin::attention {

// One key per lane: a key tile is one warp wide.
constexpr int kKeysPerTile = 32;
// Query rows one warp carries through the key tiles (its registers hold their accumulators).
constexpr int kRowsPerWarp = 4;

// Prefill: one CTA = 32 consecutive tokens of one query head, 8 warps of 4 rows.
constexpr int kPrefillWarps = 8;
constexpr int kPrefillThreads = kPrefillWarps * 32;
constexpr int kPrefillTokensPerCta = kPrefillWarps * kRowsPerWarp;

// Decode: one CTA = one token x its share of (kv head, key chunk) pairs, eight warps. With warps
// owning rows (hd64, hd128), its rows are the query heads of one kv head, which share every K/V
// tile it loads (GQA in shared memory): with one or two rows each the warps hold a group of up
// to 16 query heads, and a CTA of 256 threads keeps twice the K/V loads in flight per register
// (measured on the H200: the hd256 kernel with four warps of up to four rows issued one
// instruction per 4.8 cycles per warp, its shared-memory loads exposed, and ran at 5% of DRAM
// bandwidth).
constexpr int kDecodeWarps = 8;
constexpr int kDecodeThreads = kDecodeWarps * 32;
constexpr int kDecodeRowsPerWarp = 2;
constexpr int kDecodeMaxGroup = kDecodeWarps * kDecodeRowsPerWarp; // query heads per kv head

// The hd256 class decodes with warps owning keys instead of rows (attention/decode_keys.cuh), with
// every cache dtype, compact ones included: each warp takes its own 32-key tiles with up to
// kDecodePassRows of the group's rows (groups of kDecodeSmallPass or fewer take that many, and
// groups of 5-6, Qwen3.5-27B's, kDecodeMidPass: a padded row costs its FMAs and q loads like a real
// one), read straight from global memory, and the warps meet once at the end. It needs 200-255
// registers, so one CTA per SM.
NINFER_HD_FN constexpr bool decode_by_keys(int hd_class) { return hd_class == 256; }
NINFER_HD_FN constexpr int decode_min_ctas(int hd_class) { return decode_by_keys(hd_class) ? 1 : 2; }
constexpr int kDecodeSmallPass = 4;
constexpr int kDecodeMidPass = 6;
constexpr int kDecodePassRows = 8;
NINFER_HD_FN constexpr int decode_pass_rows(int64_t group) {
  return group <= kDecodeSmallPass ? kDecodeSmallPass : group <= kDecodeMidPass ? kDecodeMidPass : kDecodePassRows;
}

// The split-KV decode serves calls of at most this many tokens (decode batches, short chunks);
// larger calls go to the prefill kernel, which shares K/V tiles among a sequence's tokens. The
// tensor-core decode shares them too, among runs of a sequence's tokens (attention/decode_runs.cuh),
// and serves up to kDecodeRunsMaxTokens: on the H100, Qwen3-8B prefilling an 8,320-token prompt
// in chunks of 128 ran at 10,803 tok/s on it against 7,359 on the prefill kernel, the chunks'
// attention at up to 8K keys dominating (docs/cuda-attention.md).
constexpr int64_t kDecodeMaxTokens = 64;
constexpr int64_t kDecodeRunsMaxTokens = 128;
// Cap on tokens x splits of one decode call. It bounds the partial-result workspace by a
// number that does not depend on the device; the planner still picks the split count from
// residency below it.
constexpr int64_t kDecodeMaxPartials = 1024;
// A merge ticket per (token, kv head) with split keys, at most kDecodeMaxPartials of them: the
// backend's launch tickets hold them all.
static_assert(kDecodeMaxPartials <= NINFER_LAUNCH_TICKETS);

// What every attention kernel gets besides its arguments and token range: the caller's workspace
// (the split-KV decode's partial results) and its backend's launch tickets (ninfer_launch.tickets:
// where a decode's chunks meet). The prefill kernels use neither.
struct LaunchScratch {
  float* partials;
  uint32_t* tickets;
  int64_t partial_floats; // floats at `partials` (the launch's workspace_bytes / 4)
  bool runs;              // a decode may share CTAs among a sequence's tokens (attention/decode_runs.cuh)
};
// A split into chunks is only worth it when each chunk still has this many keys: one 16-key tile
// per warp of the tensor-core kernel's 8 (attention/decode_mma.cuh). On the H200, 128 against
// 256 measured +2.3-2.6% on Qwen3-8B decode at 256-1,024 keys and +1.1% on Qwen3.5-27B at 1,024,
// the same at 4,096 and at batch 8 (docs/performance.md); 64 makes the partials and their
// merge cost more than the extra chunks buy (measured on the 27B's row-owning kernel).
constexpr int64_t kMinChunkKeys = 128;

// Split counts registered as decode variants; the planner takes the largest whose CTAs are
// all resident at once on the device.
constexpr int kDecodeSplits[] = {2, 4, 8, 16, 32, 64, 128, 256, 512};
constexpr int kDecodeSplitCount = sizeof(kDecodeSplits) / sizeof(kDecodeSplits[0]);

// Cache element types (ninfer/abi/ops/kv_append.h). Every attention variant reads all three: it
// has one kernel per cache dtype, at index kv_dtype_index(dtype) of its kernel table, and
// launches the one of the call's cache.
constexpr int kKvDtypeCount = 3;
constexpr uint32_t kKvDtypeMask = (1u << NINFER_DTYPE_F32) | (1u << NINFER_DTYPE_F16) | (1u << NINFER_DTYPE_BF16);
NINFER_HD_FN int kv_dtype_index(int32_t dtype) {
  return dtype == NINFER_DTYPE_F32 ? 0 : dtype == NINFER_DTYPE_F16 ? 1 : dtype == NINFER_DTYPE_BF16 ? 2 : -1;
}

// The compact formats (kv_append.h) the float-tile kernels read (the split-KV decode, the tiled
// prefill: attention/kv_compact.cuh): one kernel per format at index kv_compact_index(dtype) of a
// variant's compact table. The tensor-core kernels read none.
constexpr int kKvCompactCount = 3;
constexpr uint32_t kKvCompactMask =
    (1u << NINFER_DTYPE_KV_INT8) | (1u << NINFER_DTYPE_KV_FP8) | (1u << NINFER_DTYPE_KV_INT4R);
NINFER_HD_FN int kv_compact_index(int32_t dtype) {
  return dtype == NINFER_DTYPE_KV_INT8 ? 0 : dtype == NINFER_DTYPE_KV_FP8 ? 1 : dtype == NINFER_DTYPE_KV_INT4R ? 2 : -1;
}
// Elements of a compact row one thread stages at once (16 code bytes; int4r 8). A compact cache's
// head_dim must be a multiple of it: every format's rule already says so but fp8's.
constexpr int kKvCompactPiece = 16;

// Kernels are compiled for head-dim classes; one compiled for HD serves head_dim in
// (HD/2, HD], the smallest class everything up to it (padding with zeros past head_dim).
constexpr int kHeadDimClasses[] = {64, 128, 256};
constexpr int kHeadDimClassCount = 3;

#ifndef __CUDACC_RTC__ // host side
inline bool head_dim_in_class(int64_t head_dim, int hd_class) {
  const int64_t low = hd_class == kHeadDimClasses[0] ? 0 : hd_class / 2;
  return head_dim > low && head_dim <= hd_class;
}
#endif

// Key chunks per kv head when a token's keys are spread over `splits` CTAs: splits below the
// kv head count split heads only (each CTA takes whole heads).
NINFER_HD_FN int chunks_per_head(int splits, int kv_heads) { return splits >= kv_heads ? splits / kv_heads : 1; }

// Floats of one partial result (running max, sum, unnormalised output row).
NINFER_HD_FN constexpr int64_t partial_floats(int64_t head_dim) { return head_dim + 2; }

#ifndef __CUDACC_RTC__ // host side
// Shapes every variant needs: a head-dim class, whole GQA groups, a token count.
// Whether every kernel's key tile lies inside one KV block of `block_tokens` positions (a power
// of two >= NINFER_ATTENTION_TILE_BLOCK_TOKENS; tiles are 16 or 32 keys from a multiple of their
// size, attention/tile.cuh's KvRows): the variants refuse other block sizes.
NINFER_HD_FN bool kv_tiles_fit_blocks(int64_t block_tokens) {
  return block_tokens >= NINFER_ATTENTION_TILE_BLOCK_TOKENS && (block_tokens & (block_tokens - 1)) == 0;
}

// kv_block_tokens 0: not stated (the launch still checks the cache's).
inline bool basic_shape_ok(const ninfer_shape& s, int hd_class) {
  const int64_t head_dim = s.dims[0], heads = s.dims[1], kv_heads = s.dims[2];
  return s.tokens > 0 && head_dim_in_class(head_dim, hd_class) && kv_heads > 0 && heads > 0 &&
         heads % kv_heads == 0 && (s.kv_block_tokens == 0 || kv_tiles_fit_blocks(s.kv_block_tokens));
}

// A compact cache's head_dim: its format's rule (kv_append.h) and whole staged pieces.
inline bool compact_head_dim_ok(int32_t dtype, int64_t head_dim) {
  return ninfer_kv_dtype_takes_head_dim(dtype, head_dim) && head_dim % kKvCompactPiece == 0;
}

// Whether a variant that reads compact caches iff `reads_compact` takes the shape's cache dtype
// and, for a compact one, its head_dim.
inline bool cache_dtype_ok(const ninfer_shape& s, bool reads_compact) {
  if (kv_dtype_index(s.dtype) >= 0) return true;
  return reads_compact && kv_compact_index(s.dtype) >= 0 && compact_head_dim_ok(s.dtype, s.dims[0]);
}

// Whether the split-KV decode with `splits` CTAs per token, serving calls of at most
// `max_tokens` tokens (kDecodeMaxTokens, kDecodeRunsMaxTokens), serves this shape. dims[3] (the
// longest span) <= 0 is treated as unknown: then only splits that do not cut the keys qualify.
inline bool decode_serves(const ninfer_shape& s, int splits, int64_t max_tokens) {
  const int64_t heads = s.dims[1], kv_heads = s.dims[2], span = s.dims[3];
  if (s.tokens > max_tokens || s.tokens * splits > kDecodeMaxPartials) return false;
  if (heads / kv_heads > kDecodeMaxGroup) return false;
  const int chunks = chunks_per_head(splits, static_cast<int>(kv_heads));
  if (chunks == 1) return true;
  return span > 0 && (span + chunks - 1) / chunks >= kMinChunkKeys;
}

// Workspace of every attention variant: room for the decode partials of the largest decode
// call (kDecodeMaxPartials token x split pairs, each `group` rows). The prefill variant reports
// it too: the split count is picked per call, so reserving workspace for any attention shape
// must reserve enough for all of them.
inline size_t workspace_bytes(const ninfer_shape& s) {
  const int64_t heads = s.dims[1], kv_heads = s.dims[2];
  if (kv_heads <= 0 || heads <= 0 || s.dims[0] <= 0) return 0;
  return static_cast<size_t>(kDecodeMaxPartials * (heads / kv_heads) * partial_floats(s.dims[0])) * sizeof(float);
}

// Shared memory of one CTA: `rows` query rows, a K tile (rows padded by 4 floats so the float4
// reads of consecutive lanes fall in distinct banks) and a V tile.
NINFER_HD_FN constexpr size_t smem_bytes(int hd_class, int rows) {
  return sizeof(float) * (static_cast<size_t>(rows) * hd_class + static_cast<size_t>(kKeysPerTile) * (hd_class + 4) +
                          static_cast<size_t>(kKeysPerTile) * hd_class);
}

// Shared memory of one key-owning decode CTA (DecodeSmem in attention/decode_keys.cuh): a pass's q
// rows and one result slot per warp and row.
NINFER_HD_FN constexpr size_t decode_keys_smem_bytes(int hd_class, int64_t group) {
  const size_t rows = static_cast<size_t>(decode_pass_rows(group));
  return sizeof(float) * (rows * hd_class + static_cast<size_t>(kDecodeWarps) * rows * partial_floats(hd_class));
}

#endif

} // namespace ninfer::cuda_plugin::attention
