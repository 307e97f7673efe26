// attention, prefill form (contract: ninfer/abi/ops/attention.h): flash-attention style.
//
// One CTA takes 32 consecutive tokens (the planner's token tile) of one query head (grid.z)
// and walks the keys of their sequence in tiles of 32 with an online softmax: no score
// matrix exists anywhere, shared memory holds one q tile and one K/V tile. Causality is a
// per-row bound on key positions, so a chunk that starts mid-sequence attends to the earlier
// cache too. A tile whose tokens belong to several sequences (mixed calls, decode batches
// too large for the split-KV decode) is processed one sequence at a time. Query heads of one
// kv head read the same K/V tiles, which they share through L2.
//
// The planner sizes grid.x (token tiles) from the variant's tokens_per_cta; the heads are an
// extra grid dimension the contract adds. The launch is ordinary (not cooperative), so its
// legality does not depend on residency.
//
// The cache may be float32, float16 or bfloat16: one kernel per cache dtype, whose K/V tiles
// are widened to float32 as they are staged (attention/tile.cuh), so the arithmetic is the same.
// A chunk after the first reads the earlier chunks' keys from the cache in its dtype. A compact
// cache (int8, fp8, int4r) has one kernel per format too, its codes widened as each tile is
// staged (attention/kv_compact.cuh); with int4r each warp rotates its q rows once.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "attention/kv_compact.cuh"
#include "attention/tile.cuh"
#include "common/grid_dependency.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include <utility>

#include "../../cuda_variant.hpp"
#include "attention/host.hpp"
#include "attention/prefill_family.hpp"
#endif

namespace ninfer::cuda_plugin::attention {
namespace {

constexpr int kRows = kPrefillTokensPerCta;

template <class E, int HD>
__device__ void prefill_tiles(const ninfer_attention_args& a, int64_t tb, int64_t te) {
  extern __shared__ __align__(16) unsigned char smem[];
  const Tiles<HD, kRows> tiles(smem);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const ninfer_kv_cache& c = a.cache;
  const int h = blockIdx.z, group = a.heads / c.kv_heads, g = h / group, hd = c.head_dim;
  const ninfer_token_batch& b = a.batch;
  const int64_t ntiles = (te - tb + kRows - 1) / kRows;
  for (int64_t n = blockIdx.x; n < ntiles; n += gridDim.x) {
    const int64_t t0 = tb + (ntiles - 1 - n) * kRows; // latest tokens (the most keys) first
    const int64_t t1 = t0 + kRows < te ? t0 + kRows : te;
    for (int64_t s0 = t0; s0 < t1;) {
      // The tile's tokens of one sequence: [s0, s1), at consecutive positions.
      const Segment sg = segment_at(b, c, s0, t1);
      const int64_t s1 = sg.s1;

      int row[kRowsPerWarp], last[kRowsPerWarp];
      bool active[kRowsPerWarp];
      int warp_last = -1;
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        row[i] = warp * kRowsPerWarp + i;
        const int64_t t = t0 + row[i];
        active[i] = t >= s0 && t < s1;
        last[i] = active[i] && sg.ok ? b.token_pos[t] : -1;
        warp_last = max(warp_last, last[i]);
      }
      __syncwarp(); // this warp's lanes are done reading its q rows of the previous segment
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        const float* src = active[i] ? a.q + (t0 + row[i]) * a.q_token_stride + h * a.q_head_stride : nullptr;
        load_q_row<HD>(tiles.q + row[i] * HD, src, hd, a.scale, lane, 32);
      }
      if constexpr (kv_rotated_keys<E>) { // int4r: H q, once per row (kv_append.h)
#pragma unroll
        for (int i = 0; i < kRowsPerWarp; ++i)
          if (active[i]) hadamard_rotate_row(tiles.q + row[i] * HD, hd, lane);
      }

      RowState<HD> st;
      st.reset();
      const int kmax = sg.ok ? sg.last_pos : -1;
      const KvSource<E> kv = kv_source<E>(c, sg.ok ? sg.slot : 0, g);
      for (int key0 = 0; key0 <= kmax; key0 += kKeysPerTile) {
        const int nkeys = kmax + 1 - key0 < kKeysPerTile ? kmax + 1 - key0 : kKeysPerTile;
        __syncthreads(); // every warp is done with the previous K/V tile
        load_tile<E, HD, kRows, kPrefillThreads>(tiles, kv, key0, nkeys);
        __syncthreads(); // the tile (and every warp's q rows) are in place
        if (warp_last >= key0) attend_tile(st, tiles, row, last, key0, nkeys, lane);
      }
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i)
        if (active[i]) store_row(st, i, a.out + (t0 + row[i]) * a.out_token_stride + static_cast<int64_t>(h) * hd, hd, lane);
      s0 = s1;
    }
  }
}

} // namespace
} // namespace ninfer::cuda_plugin::attention

// Kernel entry points: extern "C" so their cubin names are the symbols of the build-time
// resource table. One per (head-dim class, cache dtype); 16-bit caches add _kvf16 / _kvbf16, compact
// ones _kvint8 / _kvfp8 / _kvint4r.
#define NINFER_ATTENTION_PREFILL(NAME, E, HD)                                                                \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::attention::kPrefillThreads)              \
      ninfer_attention_##NAME(ninfer_attention_args a, int64_t b, int64_t e,                                 \
                              ninfer::cuda_plugin::attention::LaunchScratch) {                               \
    ninfer::cuda_plugin::grid_dependency_prologue();                                                         \
    ninfer::cuda_plugin::attention::prefill_tiles<E, HD>(a, b, e);                                           \
  }
NINFER_ATTENTION_PREFILL(prefill_hd64, float, 64)
NINFER_ATTENTION_PREFILL(prefill_hd128, float, 128)
NINFER_ATTENTION_PREFILL(prefill_hd256, float, 256)
NINFER_ATTENTION_PREFILL(prefill_hd64_kvf16, __half, 64)
NINFER_ATTENTION_PREFILL(prefill_hd128_kvf16, __half, 128)
NINFER_ATTENTION_PREFILL(prefill_hd256_kvf16, __half, 256)
NINFER_ATTENTION_PREFILL(prefill_hd64_kvbf16, __nv_bfloat16, 64)
NINFER_ATTENTION_PREFILL(prefill_hd128_kvbf16, __nv_bfloat16, 128)
NINFER_ATTENTION_PREFILL(prefill_hd256_kvbf16, __nv_bfloat16, 256)

// Compact caches, held to two CTAs per SM (128 registers): a variant is planned with the
// resources of its kernel that needs the most, and unbounded the fp8 hd256 kernel took 154 (sm_90),
// which would have halved the residency the planner gives every cache dtype's prefill_hd256.
#define NINFER_ATTENTION_PREFILL_COMPACT(NAME, F, HD)                                                        \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::attention::kPrefillThreads, 2)           \
      ninfer_attention_##NAME(ninfer_attention_args a, int64_t b, int64_t e,                                 \
                              ninfer::cuda_plugin::attention::LaunchScratch) {                               \
    ninfer::cuda_plugin::grid_dependency_prologue();                                                         \
    ninfer::cuda_plugin::attention::prefill_tiles<ninfer::cuda_plugin::attention::F, HD>(a, b, e);           \
  }
NINFER_ATTENTION_PREFILL_COMPACT(prefill_hd64_kvint8, KvInt8, 64)
NINFER_ATTENTION_PREFILL_COMPACT(prefill_hd128_kvint8, KvInt8, 128)
NINFER_ATTENTION_PREFILL_COMPACT(prefill_hd256_kvint8, KvInt8, 256)
NINFER_ATTENTION_PREFILL_COMPACT(prefill_hd64_kvfp8, KvFp8, 64)
NINFER_ATTENTION_PREFILL_COMPACT(prefill_hd128_kvfp8, KvFp8, 128)
NINFER_ATTENTION_PREFILL_COMPACT(prefill_hd256_kvfp8, KvFp8, 256)
NINFER_ATTENTION_PREFILL_COMPACT(prefill_hd64_kvint4r, KvInt4r, 64)
NINFER_ATTENTION_PREFILL_COMPACT(prefill_hd128_kvint4r, KvInt4r, 128)
NINFER_ATTENTION_PREFILL_COMPACT(prefill_hd256_kvint4r, KvInt4r, 256)

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin::attention {
namespace {

#define NINFER_PREFILL_KERNEL(HD)                                                                            \
  {HD,                                                                                                       \
   kPrefillThreads,                                                                                          \
   kRows,                                                                                                    \
   smem_bytes(HD, kRows),                                                                                    \
   "prefill_hd" #HD,                                                                                         \
   {"ninfer_attention_prefill_hd" #HD, "ninfer_attention_prefill_hd" #HD "_kvf16",                           \
    "ninfer_attention_prefill_hd" #HD "_kvbf16"},                                                            \
   {ninfer_attention_prefill_hd##HD, ninfer_attention_prefill_hd##HD##_kvf16,                               \
    ninfer_attention_prefill_hd##HD##_kvbf16},                                                               \
   {"ninfer_attention_prefill_hd" #HD "_kvint8", "ninfer_attention_prefill_hd" #HD "_kvfp8",                 \
    "ninfer_attention_prefill_hd" #HD "_kvint4r"},                                                           \
   {ninfer_attention_prefill_hd##HD##_kvint8, ninfer_attention_prefill_hd##HD##_kvfp8,                       \
    ninfer_attention_prefill_hd##HD##_kvint4r}}

const PrefillKernel* prefill_kernels() {
  static const PrefillKernel k[kHeadDimClassCount] = {NINFER_PREFILL_KERNEL(64), NINFER_PREFILL_KERNEL(128),
                                                      NINFER_PREFILL_KERNEL(256)};
  return k;
}
#undef NINFER_PREFILL_KERNEL

} // namespace

int32_t register_attention_prefill(const ninfer_registrar* r, char* err, size_t err_len) {
  return register_prefill_kernels<prefill_kernels>(r, err, err_len,
                                                   std::make_integer_sequence<int, kHeadDimClassCount>{});
}

} // namespace ninfer::cuda_plugin::attention
#endif // __CUDACC_RTC__
