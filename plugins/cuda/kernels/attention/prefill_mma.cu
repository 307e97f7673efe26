// attention, prefill form on tensor cores (contract: ninfer/abi/ops/attention.h): flash
// attention 2 style with mma.sync on fp16 or bf16 inputs (one template, two variant families).
//
// One CTA takes consecutive tokens (the planner's token tile: 128 for hd128 with 8 warps, 64
// for hd256 with 4) of one query head (grid.z); each warp owns 16 query rows. The CTA walks the
// keys of their sequence in tiles of 32 keys, and for each tile every warp computes S = Q K^T
// (m16n8k16 MMAs), updates its rows' online softmax in registers, and adds P V (MMAs again, P
// taken straight from the S accumulators). No score matrix exists anywhere; shared memory
// holds the q tile and one K and one V tile.
//
// Precision: the contract's q is float32, its cache float32, float16 or bfloat16 (one kernel per
// cache dtype). They are rounded to the input format (In: fp16 or bf16) while they are staged
// into shared memory (q already multiplied by scale * log2(e), so the softmax runs on exp2; a
// cache already in the input format is copied as it is, so an fp16 cache gives the fp16 variants
// exactly the K and V a float32 cache would), P is rounded before P V, and the running sum adds the
// rounded weights so the output stays a convex combination of (rounded) value rows. Both
// products accumulate in float32, the softmax (max, exp2, sums) is float32, the output is
// float32. Expected error per output row (relative L2): about 4e-3 with bf16, 5e-4 with fp16,
// whose range (65504) bounds q * scale, K and V (docs/cuda-attention.md).
//
// The _pipe variants keep two K/V tiles in shared memory where the cache is already in the input
// format (an fp16 cache for the fp16 kernels, bf16 for bf16) with 16-byte rows: the next tile's
// rows travel by cp.async (no registers, zero-filled past the keys and head_dim) while the warps
// compute on the current one. Other caches stage synchronously, as the plain variants do.
//
// Causality and batches work as in the float32 prefill (attention/prefill.cu): the key loop of
// a tile stops at its last token's position, a key tile is masked only where it crosses some
// row's position, a warp whose rows all end before a tile skips it, tiles run latest tokens
// first, and a tile whose tokens belong to several sequences is processed one sequence at a
// time (tokens of other sequences are inactive rows). GQA: head h reads kv head
// h / (heads / kv_heads); the heads of one kv head share its tiles through L2.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "attention/mma_tile.cuh"
#include "attention/prefill_wgmma.cuh"
#include "attention/tile.cuh"
#include "common/cp_async.cuh"
#include "common/grid_dependency.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include <utility>

#include "../../cuda_variant.hpp"
#include "attention/host.hpp"
#include "attention/prefill_family.hpp"
#endif

namespace ninfer::cuda_plugin::attention {
namespace {

// Tiles of the two head-dim classes, shared by the kernel entry points and their variants.
constexpr int kMmaKeyTile = 32, kHd128Warps = 8, kHd256Warps = 4;

#ifndef __CUDACC_RTC__ // host side
// q tile (16 rows per warp), then `bufs` pairs of a K tile and a V tile.
constexpr size_t mma_smem_bytes(int hd, int warps, int key_tile, int bufs) {
  return sizeof(__nv_bfloat16) * static_cast<size_t>(16 * warps + 2 * bufs * key_tile) * mma_pitch(hd);
}
#endif

// One 16-byte cache vector (KvElem<E>::kVec elements) as elements of the input format at p
// (8-byte aligned for 4 elements, 16-byte for 8): copied when the cache is in the input format,
// else widened and rounded.
template <class In, class E>
__device__ __forceinline__ void stage_vec(typename In::T* p, const uint4& raw) {
  if constexpr (std::is_same_v<E, typename In::T>) {
    *reinterpret_cast<uint4*>(p) = raw;
  } else {
    constexpr int kVec = KvElem<E>::kVec;
    float f[kVec];
    KvElem<E>::widen(raw, f);
    if constexpr (kVec == 4) {
      *reinterpret_cast<uint2*>(p) = make_uint2(In::pack(f[0], f[1]), In::pack(f[2], f[3]));
    } else {
      *reinterpret_cast<uint4*>(p) =
          make_uint4(In::pack(f[0], f[1]), In::pack(f[2], f[3]), In::pack(f[4], f[5]), In::pack(f[6], f[7]));
    }
  }
}

// Stages keys [key0, key0 + nkeys) of K and V in the input format, zero rows after them (the cache
// holds NaN or garbage there, and 0 * NaN would poison P V) and zero dims past head_dim. The tile
// (BC keys from a multiple of BC) lies in one KV block (tile.cuh, KvRows).
template <class In, class E, int HD, int BC, int THREADS>
__device__ void stage_kv(typename In::T* ks, typename In::T* vs, const KvRows<E>& slot_rows, int key0, int nkeys) {
  static_assert(BC <= NINFER_ATTENTION_TILE_BLOCK_TOKENS, "a key tile must fit the smallest KV block");
  constexpr int P = mma_pitch(HD);
  const KvRows<E> kv = slot_rows.tile(key0);
  if (kv.vec) {
    constexpr int kIters = BC * TileVec<E, HD>::kPerRow / THREADS;
    // Loads in flight per thread; 8-warp CTAs (2 per SM at 128 registers, the output block
    // live meanwhile) take fewer at a time, having twice the threads issuing them.
    constexpr int kBatch = THREADS >= 256 || kIters < 4 ? 2 : 4;
    static_assert(BC * TileVec<E, HD>::kPerRow % THREADS == 0 && kIters % kBatch == 0, "tile must split evenly");
#pragma unroll 1
    for (int it0 = 0; it0 < kIters; it0 += kBatch) {
      uint4 kr[kBatch], vr[kBatch];
#pragma unroll
      for (int it = 0; it < kBatch; ++it) // all loads of the batch in flight before any store
        fetch_vec<E, HD>(kv, nkeys, TileVec<E, HD>(threadIdx.x + (it0 + it) * THREADS), kr[it], vr[it]);
#pragma unroll
      for (int it = 0; it < kBatch; ++it) {
        const TileVec<E, HD> at(threadIdx.x + (it0 + it) * THREADS);
        stage_vec<In, E>(ks + at.j * P + at.d, kr[it]);
        stage_vec<In, E>(vs + at.j * P + at.d, vr[it]);
      }
    }
  } else {
    for (int i = threadIdx.x; i < BC * HD; i += THREADS) {
      const int j = i / HD, d = i % HD;
      float kx = 0.f, vx = 0.f;
      if (j < nkeys && d < kv.head_dim) {
        const int64_t off = static_cast<int64_t>(j) * kv.pos_stride + d;
        kx = KvElem<E>::load(kv.k + off);
        vx = KvElem<E>::load(kv.v + off);
      }
      ks[j * P + d] = In::from(kx);
      vs[j * P + d] = In::from(vx);
    }
  }
}

// Starts copying keys [key0, key0 + nkeys) of K and V (a cache in the input format, 16-byte rows)
// into the tiles with cp.async, as one commit group of each thread: zeros past the keys and past
// head_dim, as stage_kv writes. The tile lies in one KV block.
template <class T, int HD, int BC, int THREADS>
__device__ void copy_kv_async(T* ks, T* vs, const KvRows<T>& slot_rows, int key0, int nkeys) {
  constexpr int P = mma_pitch(HD), kVec = 16 / sizeof(T), kPerRow = HD / kVec;
  static_assert(BC <= NINFER_ATTENTION_TILE_BLOCK_TOKENS, "a key tile must fit the smallest KV block");
  static_assert(BC * kPerRow % THREADS == 0, "tile must split evenly");
  const KvRows<T> kv = slot_rows.tile(key0);
#pragma unroll
  for (int it = 0; it < BC * kPerRow / THREADS; ++it) {
    const int i = threadIdx.x + it * THREADS;
    copy_vec_async(ks, vs, kv, nkeys, i / kPerRow, (i % kPerRow) * kVec, P);
  }
  cp_async_commit();
}

// BUFS: K/V tile pairs in shared memory (2: the _pipe variants, see the top of the file).
template <class In, class E, int HD, int WARPS, int BC, int BUFS>
__device__ void prefill_mma_tiles(const ninfer_attention_args& a, int64_t tb, int64_t te) {
  using T = typename In::T;
  constexpr int P = mma_pitch(HD), kRowsPerCta = 16 * WARPS;
  extern __shared__ __align__(16) unsigned char smem[];
  // Copied by cp.async into a second tile pair while the warps read the first: the cache already
  // in the input format, whose rows need no conversion.
  constexpr bool kPipe = BUFS == 2 && std::is_same_v<E, T>;
  T* const qs = reinterpret_cast<T*>(smem);
  T* const ks = qs + kRowsPerCta * P;
  T* const vs = ks + BC * P;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  T* const qw = qs + warp * 16 * P; // this warp's 16 q rows
  const LaneAddrs ad = lane_addrs<HD>(qw, ks, vs, lane);
  constexpr int kPairElems = 2 * BC * P; // the second pair (BUFS == 2) follows the first
  T* const ks2 = ks + kPairElems;
  const ninfer_kv_cache& cache = a.cache;
  const int h = blockIdx.z, group = a.heads / cache.kv_heads, hd = cache.head_dim;
  const float qscale = a.scale * kLog2e;
  const ninfer_token_batch& b = a.batch;
  const int64_t ntiles = (te - tb + kRowsPerCta - 1) / kRowsPerCta;
  for (int64_t tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
    const int64_t t0 = tb + (ntiles - 1 - tile) * kRowsPerCta; // latest tokens (the most keys) first
    const int64_t t1 = t0 + kRowsPerCta < te ? t0 + kRowsPerCta : te;
    for (int64_t s0 = t0; s0 < t1;) {
      // The tile's tokens of one sequence: [s0, s1), at consecutive positions.
      const Segment sg = segment_at(b, cache, s0, t1);
      const int64_t s1 = sg.s1;

      // Rows g and g + 8 of this warp: their tokens and the last key position each may see.
      int last[2];
      bool active[2];
      segment_rows(b, sg, t0, s0, warp, g, active, last);
      const int warp_last = __reduce_max_sync(kFullMask, max(last[0], last[1]));
      const int warp_first_last = __reduce_min_sync(kFullMask, min(last[0], last[1]));

      // This warp's q rows, times scale * log2(e), rounded to In; zero in rows of other sequences.
      __syncwarp(); // the warp's lanes are done reading the previous segment's q rows
      for (int rr = 0; rr < 16; ++rr) {
        const int64_t t = t0 + warp * 16 + rr;
        const bool on = t >= s0 && t < s1;
        const float* src = on ? a.q + t * a.q_token_stride + static_cast<int64_t>(h) * a.q_head_stride : nullptr;
        for (int d = lane; d < HD; d += 32)
          qw[rr * P + d] = In::from(src && d < hd ? __ldg(src + d) * qscale : 0.f);
      }
      __syncwarp();

      MmaRows<HD> st;
      st.reset();
      const int kmax = sg.ok ? sg.last_pos : -1;
      const KvRows<E> kv = kv_rows<E>(cache, sg.ok ? sg.slot : 0, h / group);
      bool piped = false;
      if constexpr (kPipe) {
        if (kv.vec) {
          // Tile i in pair i % 2; the copy of tile i + 1 is in flight while tile i is read. The
          // barrier after each tile frees its pair for the copy two tiles later.
          piped = true;
          __syncthreads(); // every warp is done with both pairs (the previous segment's tiles)
          if (kmax >= 0) copy_kv_async<T, HD, BC, WARPS * 32>(ks, vs, kv, 0, kmax + 1 < BC ? kmax + 1 : BC);
          for (int key0 = 0, i = 0; key0 <= kmax; key0 += BC, ++i) {
            const int next = key0 + BC;
            if (next <= kmax) {
              T* const nk = (i & 1) ? ks : ks2;
              copy_kv_async<T, HD, BC, WARPS * 32>(nk, nk + BC * P, kv, next, kmax + 1 - next < BC ? kmax + 1 - next : BC);
              cp_async_wait<1>(); // this thread's copies of tile i have landed
            } else {
              cp_async_wait<0>();
            }
            __syncthreads(); // and every thread's
            if (warp_last >= key0) {
              LaneAddrs at = ad;
              const uint32_t shift = (i & 1) * kPairElems * sizeof(T);
              at.k += shift, at.v += shift;
              attend_tile_mma<In, HD, BC>(st, at, key0, last, key0 + BC - 1 > warp_first_last, lane);
            }
            __syncthreads(); // every warp is done with tile i's pair
          }
        }
      }
      if (!piped) {
        for (int key0 = 0; key0 <= kmax; key0 += BC) {
          const int nkeys = kmax + 1 - key0 < BC ? kmax + 1 - key0 : BC;
          __syncthreads(); // every warp is done with the previous K/V tile
          stage_kv<In, E, HD, BC, WARPS * 32>(ks, vs, kv, key0, nkeys);
          __syncthreads();
          if (warp_last >= key0)
            attend_tile_mma<In, HD, BC>(st, ad, key0, last, key0 + BC - 1 > warp_first_last, lane);
        }
      }

      store_rows(st, a, t0 + warp * 16 + g, h, active, c);
      s0 = s1;
    }
  }
}

} // namespace
} // namespace ninfer::cuda_plugin::attention

// Kernel entry points: extern "C" so their cubin names are the symbols of the build-time
// resource table. (input format, head dim class, warps, keys per tile, resident CTAs asked of
// ptxas; the two formats have the same tiles and residency, registers within 4):
//   hd128  8 warps (128 tokens), 32 keys, 2 CTAs/SM: 128 registers (sm_90: a 4-byte spill).
//          Measured on the H200 against 4 warps x 64 keys at 3 CTAs/SM (166 registers): 151 vs
//          146 TFLOP/s at 4096 tokens, 183 vs 172 at 8192 (docs/cuda-attention.md): a CTA of
//          128 rows reads each K/V tile from L2 for twice the rows.
//   hd256  4 warps ( 64 tokens), 32 keys, 2 CTAs/SM: 240 registers (a 16 x 256 output block is
//          128 float registers per thread; 8 warps would leave one CTA per SM).
// One kernel per cache dtype (E); 16-bit caches add _kvf16 / _kvbf16 to the name. The _pipe
// variants (two K/V tile pairs) have their own kernel for the cache in their input format only;
// for the other caches they launch the plain variant's kernels.
#define NINFER_ATTENTION_PREFILL_MMA_KV(NAME, IN, E, HD, WARPS, MIN_BLOCKS, BUFS)                            \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::attention::WARPS * 32, MIN_BLOCKS)       \
      ninfer_attention_##NAME(ninfer_attention_args a, int64_t b, int64_t e,                                 \
                              ninfer::cuda_plugin::attention::LaunchScratch) {                               \
    ninfer::cuda_plugin::grid_dependency_prologue();                                                          \
    using namespace ninfer::cuda_plugin::attention;                                                           \
    prefill_mma_tiles<mma::IN, E, HD, WARPS, kMmaKeyTile, BUFS>(a, b, e);                                     \
  }
#define NINFER_ATTENTION_PREFILL_MMA(NAME, IN, HD, WARPS, MIN_BLOCKS)                                        \
  NINFER_ATTENTION_PREFILL_MMA_KV(NAME, IN, float, HD, WARPS, MIN_BLOCKS, 1)                                 \
  NINFER_ATTENTION_PREFILL_MMA_KV(NAME##_kvf16, IN, __half, HD, WARPS, MIN_BLOCKS, 1)                        \
  NINFER_ATTENTION_PREFILL_MMA_KV(NAME##_kvbf16, IN, __nv_bfloat16, HD, WARPS, MIN_BLOCKS, 1)
NINFER_ATTENTION_PREFILL_MMA(prefill_mma_f16_hd128, F16Inputs, 128, kHd128Warps, 2)
NINFER_ATTENTION_PREFILL_MMA(prefill_mma_f16_hd256, F16Inputs, 256, kHd256Warps, 2)
NINFER_ATTENTION_PREFILL_MMA(prefill_mma_hd128, Bf16Inputs, 128, kHd128Warps, 2)
NINFER_ATTENTION_PREFILL_MMA(prefill_mma_hd256, Bf16Inputs, 256, kHd256Warps, 2)
NINFER_ATTENTION_PREFILL_MMA_KV(prefill_mma_f16_hd128_pipe_kvf16, F16Inputs, __half, 128, kHd128Warps, 2, 2)
NINFER_ATTENTION_PREFILL_MMA_KV(prefill_mma_f16_hd256_pipe_kvf16, F16Inputs, __half, 256, kHd256Warps, 2, 2)
NINFER_ATTENTION_PREFILL_MMA_KV(prefill_mma_hd128_pipe_kvbf16, Bf16Inputs, __nv_bfloat16, 128, kHd128Warps, 2, 2)
NINFER_ATTENTION_PREFILL_MMA_KV(prefill_mma_hd256_pipe_kvbf16, Bf16Inputs, __nv_bfloat16, 256, kHd256Warps, 2, 2)
// Hopper's warpgroup MMA (attention/prefill_wgmma.cuh), the cache in the input format only; each
// variant launches its mma.sync family's kernels for the other caches (same threads and tokens
// per CTA). Compiled in every build, empty where wgmma does not exist; registered by the sm_90a
// plugin only.
#define NINFER_ATTENTION_PREFILL_WGMMA(NAME, IN, HD, WARPS)                                                  \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::attention::WARPS * 32, 2)                \
      ninfer_attention_##NAME(ninfer_attention_args a, int64_t b, int64_t e,                                 \
                              ninfer::cuda_plugin::attention::LaunchScratch) {                               \
    ninfer::cuda_plugin::grid_dependency_prologue();                                                          \
    using namespace ninfer::cuda_plugin::attention;                                                           \
    prefill_wgmma_entry<mma::IN, HD, WARPS / 4>(a, b, e);                                                     \
  }
NINFER_ATTENTION_PREFILL_WGMMA(prefill_mma_f16_hd128_wgmma_kvf16, F16Inputs, 128, kHd128Warps)
NINFER_ATTENTION_PREFILL_WGMMA(prefill_mma_f16_hd256_wgmma_kvf16, F16Inputs, 256, kHd256Warps)
NINFER_ATTENTION_PREFILL_WGMMA(prefill_mma_hd128_wgmma_kvbf16, Bf16Inputs, 128, kHd128Warps)
NINFER_ATTENTION_PREFILL_WGMMA(prefill_mma_hd256_wgmma_kvbf16, Bf16Inputs, 256, kHd256Warps)
#if defined(NINFER_KERNELS_CC_MAJOR) && NINFER_KERNELS_CC_MAJOR == 9
#define NINFER_PREFILL_WGMMA 1
#else
#define NINFER_PREFILL_WGMMA 0
#endif

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin::attention {
namespace {

// Only the Qwen head-dim classes: the hd64 class (the fixtures' 16 and 32) stays on the
// float32 kernel, whose results the fixtures' float32 golden logits are held to.
// fp16 first: the two formats plan identically and the planner keeps the first of equally
// good variants, so fp16 (8x finer rounding) is the default and the bf16 pair is what a
// schedule table names for a model whose q * scale, K or V exceed fp16's range.
constexpr int kMmaVariants = 8 + 4 * NINFER_PREFILL_WGMMA;
static_assert(kHd128Warps % 4 == 0 && kHd256Warps % 4 == 0, "a wgmma CTA is whole warpgroups");

// In the order of the kernel entry points above; threads, tokens and shared memory follow
// from each class's warps; one kernel per cache dtype, none for the compact formats (the tiled
// prefill reads those: its launch refuses them with that reason). A _pipe or _wgmma variant
// (registered after the plain ones, so a schedule table chooses it) has its own kernel for one
// cache dtype.
#define NINFER_MMA_KERNEL_SMEM(NAME, HD, WARPS, SMEM, FLOAT, KVF16, KVBF16)                                \
  {HD,                                                                                                       \
   WARPS * 32,                                                                                               \
   16 * WARPS,                                                                                               \
   SMEM,                                                                                                     \
   #NAME,                                                                                                    \
   {"ninfer_attention_" #FLOAT, "ninfer_attention_" #KVF16, "ninfer_attention_" #KVBF16},                   \
   {ninfer_attention_##FLOAT, ninfer_attention_##KVF16, ninfer_attention_##KVBF16},                         \
   {},                                                                                                       \
   {}}
#define NINFER_MMA_KERNEL_OF(NAME, HD, WARPS, BUFS, ...)                                                     \
  NINFER_MMA_KERNEL_SMEM(NAME, HD, WARPS, mma_smem_bytes(HD, WARPS, kMmaKeyTile, BUFS), __VA_ARGS__)
#define NINFER_MMA_KERNEL(NAME, HD, WARPS) NINFER_MMA_KERNEL_OF(NAME, HD, WARPS, 1, NAME, NAME##_kvf16, NAME##_kvbf16)

const PrefillKernel* mma_kernels() {
  static const PrefillKernel k[kMmaVariants] = {
      NINFER_MMA_KERNEL(prefill_mma_f16_hd128, 128, kHd128Warps),
      NINFER_MMA_KERNEL(prefill_mma_f16_hd256, 256, kHd256Warps),
      NINFER_MMA_KERNEL(prefill_mma_hd128, 128, kHd128Warps),
      NINFER_MMA_KERNEL(prefill_mma_hd256, 256, kHd256Warps),
      NINFER_MMA_KERNEL_OF(prefill_mma_f16_hd128_pipe, 128, kHd128Warps, 2, prefill_mma_f16_hd128,
                           prefill_mma_f16_hd128_pipe_kvf16, prefill_mma_f16_hd128_kvbf16),
      NINFER_MMA_KERNEL_OF(prefill_mma_f16_hd256_pipe, 256, kHd256Warps, 2, prefill_mma_f16_hd256,
                           prefill_mma_f16_hd256_pipe_kvf16, prefill_mma_f16_hd256_kvbf16),
      NINFER_MMA_KERNEL_OF(prefill_mma_hd128_pipe, 128, kHd128Warps, 2, prefill_mma_hd128, prefill_mma_hd128_kvf16,
                           prefill_mma_hd128_pipe_kvbf16),
      NINFER_MMA_KERNEL_OF(prefill_mma_hd256_pipe, 256, kHd256Warps, 2, prefill_mma_hd256, prefill_mma_hd256_kvf16,
                           prefill_mma_hd256_pipe_kvbf16),
#if NINFER_PREFILL_WGMMA // whole warpgroups: the mma.sync families' threads and tokens
      NINFER_MMA_KERNEL_SMEM(prefill_mma_f16_hd128_wgmma, 128, kHd128Warps, wgmma_smem_bytes(128, kHd128Warps / 4),
                             prefill_mma_f16_hd128, prefill_mma_f16_hd128_wgmma_kvf16, prefill_mma_f16_hd128_kvbf16),
      NINFER_MMA_KERNEL_SMEM(prefill_mma_f16_hd256_wgmma, 256, kHd256Warps, wgmma_smem_bytes(256, kHd256Warps / 4),
                             prefill_mma_f16_hd256, prefill_mma_f16_hd256_wgmma_kvf16, prefill_mma_f16_hd256_kvbf16),
      NINFER_MMA_KERNEL_SMEM(prefill_mma_hd128_wgmma, 128, kHd128Warps, wgmma_smem_bytes(128, kHd128Warps / 4),
                             prefill_mma_hd128, prefill_mma_hd128_kvf16, prefill_mma_hd128_wgmma_kvbf16),
      NINFER_MMA_KERNEL_SMEM(prefill_mma_hd256_wgmma, 256, kHd256Warps, wgmma_smem_bytes(256, kHd256Warps / 4),
                             prefill_mma_hd256, prefill_mma_hd256_kvf16, prefill_mma_hd256_wgmma_kvbf16),
#endif
  };
  return k;
}
#undef NINFER_MMA_KERNEL
#undef NINFER_MMA_KERNEL_OF
#undef NINFER_MMA_KERNEL_SMEM

} // namespace

int32_t register_attention_prefill_mma(const ninfer_registrar* r, char* err, size_t err_len) {
  return register_prefill_kernels<mma_kernels>(r, err, err_len, std::make_integer_sequence<int, kMmaVariants>{});
}

} // namespace ninfer::cuda_plugin::attention
#endif // __CUDACC_RTC__
