// attention, prefill form on Hopper's warpgroup MMA (sm_90a; entry points and variants in
// attention/prefill_mma.cu, instructions in attention/wgmma.cuh): the hd128 and hd256 classes with
// a 16-bit cache in the kernel's input format (fp16 cache for the fp16 kernels, bf16 for bf16).
//
// Why: the mma.sync prefill (attention/mma_tile.cuh) has each warp read the whole K and V tile
// from shared memory through ldmatrix for its own 16 rows. A warpgroup MMA reads its B operand
// once for all 64 rows of the warpgroup, so shared-memory traffic per multiply-add falls about
// 2.5x, and the products run asynchronously to the issuing threads.
//
// A CTA has the geometry of the mma.sync family it stands in for: hd256 one warpgroup (4 warps,
// 64 tokens), hd128 two (8 warps, 128 tokens) sharing each K/V tile; warp w owns rows 16 w ..
// 16 w + 15 of one query head's consecutive tokens. Keys come in tiles of 32, two K/V tile pairs
// in shared memory: the next tile's rows travel by cp.async while the warpgroups attend to the
// current one. Per tile and warpgroup: S = Q K^T as HD / 16 m64n32k16 products (Q and K in
// shared memory), the online softmax on the S accumulators in registers (identical to
// attention/mma_tile.cuh's, so the precision statement of attention/prefill_mma.cu holds
// unchanged), then P V as 2 m64nHDk16 products with P in registers. Shared memory: 96 KiB (hd256)
// and 64 KiB (hd128), 2 CTAs per SM, so one CTA's softmax overlaps the other's products.
//
// Rows, causality, batches of several sequences and tokens outside the cache work as in
// prefill_mma_tiles (the same walk, latest tiles first). A warpgroup's products need all its
// warps, so a tile runs while any row of the CTA may see it; a warp with no visible key there
// masks all of it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "attention/mma_tile.cuh"
#include "attention/tile.cuh"
#include "attention/wgmma.cuh"
#include "common/cp_async.cuh"

namespace ninfer::cuda_plugin::attention {

// Keys per tile; rows and threads of one warpgroup.
constexpr int kWgKeys = 32, kWgRows = 64, kWgThreads = 128;

// Dynamic shared memory of a CTA of `groups` warpgroups: the q tile and two K/V tile pairs.
__host__ __device__ constexpr size_t wgmma_smem_bytes(int hd, int groups) {
  return 2 * static_cast<size_t>(kWgRows * groups + 4 * kWgKeys) * hd;
}

} // namespace ninfer::cuda_plugin::attention

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
namespace ninfer::cuda_plugin::attention {

// Starts copying keys [key0, key0 + nkeys) of K and V (16-byte rows in the input format) into the
// core-matrix tiles at shared-space addresses ks and vs, zeros past the keys and head_dim, as one
// commit group of each thread. Thread i copies the 16 bytes that land at byte 16 i: rows 8 apart
// never share a core matrix, so a warp's 32 copies fill 4 whole core matrices.
template <class T, int HD, int THREADS>
__device__ __forceinline__ void wg_copy_kv_async(uint32_t ks, uint32_t vs, const KvRows<T>& slot_rows, int key0,
                                                 int nkeys) {
  constexpr int kChunks = kWgKeys * HD / 8;
  static_assert(kChunks % THREADS == 0, "tile must split evenly");
  static_assert(kWgKeys <= NINFER_ATTENTION_TILE_BLOCK_TOKENS, "a key tile must fit the smallest KV block");
  const KvRows<T> kv = slot_rows.tile(key0);
#pragma unroll
  for (int it = 0; it < kChunks / THREADS; ++it) {
    const int i = threadIdx.x + it * THREADS;
    const int2 at = wgmma::core_chunk<HD>(i);
    copy_vec_async_to(ks + 16 * i, vs + 16 * i, kv, nkeys, at.x, at.y);
  }
  cp_async_commit();
}

// The same keys staged element by element (rows that are not whole 16-byte vectors).
template <class In, int HD, int THREADS>
__device__ void wg_stage_kv(unsigned char* ks, unsigned char* vs, const KvRows<typename In::T>& slot_rows, int key0,
                            int nkeys) {
  const KvRows<typename In::T> kv = slot_rows.tile(key0);
  for (int i = threadIdx.x; i < kWgKeys * HD; i += THREADS) {
    const int j = i / HD, d = i % HD;
    float kx = 0.f, vx = 0.f;
    if (j < nkeys && d < kv.head_dim) {
      const int64_t off = static_cast<int64_t>(j) * kv.pos_stride + d;
      kx = KvElem<typename In::T>::load(kv.k + off);
      vx = KvElem<typename In::T>::load(kv.v + off);
    }
    const uint32_t at = wgmma::core_offset<HD>(j, d);
    *reinterpret_cast<typename In::T*>(ks + at) = In::from(kx);
    *reinterpret_cast<typename In::T*>(vs + at) = In::from(vx);
  }
}

// One key tile against the 64 rows of this thread's warpgroup. q: shared-space address of the
// warpgroup's rows of the q tile, k, v: of the K and V tiles; last/mask as in attend_tile_mma
// (this thread's rows g and g + 8 of its warp).
template <class In, int HD>
__device__ __forceinline__ void attend_tile_wgmma(MmaRows<HD>& st, uint32_t q, uint32_t k, uint32_t v, int key0,
                                                  const int (&last)[2], bool mask, int lane) {
  static_assert(HD == 128 || HD == 256, "the P V product is m64n128 or m64n256");
  constexpr int NT = kWgKeys / 8;
  constexpr uint32_t kRowGroup = 16 * HD; // bytes between core matrices 8 rows apart
  const int c = lane & 3;

  float s[NT][4];
  wgmma::fence_operands(s);
  wgmma::fence();
  // A descriptor's address field counts 16-byte units in its low bits (tiles lie far below the
  // field's 256 KiB), so a step along the tile adds to the descriptor itself.
  const uint64_t dq = wgmma::desc(q, 128, kRowGroup), dk = wgmma::desc(k, 128, kRowGroup);
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) wgmma::Ops<In>::s(s, dq + kk * (256 / 16), dk + kk * (256 / 16), kk);
  wgmma::commit();
  wgmma::wait<0>();
  wgmma::fence_operands(s);

  float mu[2];
  softmax_step(st, s, key0, last, mask, c, mu);
  uint32_t p[kWgKeys / 16][4];
#pragma unroll
  for (int j = 0; j < kWgKeys / 16; ++j) pack_weights<In>(st, s, mu, j, p[j]);
  wgmma::fence_operands(st.o);
  wgmma::fence();
  const uint64_t dv = wgmma::desc(v, kRowGroup, 128);
#pragma unroll
  for (int j = 0; j < kWgKeys / 16; ++j) wgmma::Ops<In>::pv(st.o, p[j], dv + j * (2 * kRowGroup / 16));
  wgmma::commit();
  wgmma::wait<0>();
  wgmma::fence_operands(st.o);
}

// GROUPS warpgroups per CTA (64 GROUPS rows) share each K/V tile.
template <class In, int HD, int GROUPS>
__device__ void prefill_wgmma_tiles(const ninfer_attention_args& a, int64_t tb, int64_t te) {
  using T = typename In::T;
  constexpr int kRows = kWgRows * GROUPS, kThreads = kWgThreads * GROUPS;
  constexpr uint32_t kQBytes = kRows * HD * 2, kTileBytes = kWgKeys * HD * 2, kPairBytes = 2 * kTileBytes;
  extern __shared__ __align__(16) unsigned char smem[];
  const uint32_t qs = mma::smem_addr(smem), ks = qs + kQBytes; // pair p: K at ks + p * kPairBytes, V after it
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2;
  // This warpgroup's 64 q rows (a constant for one warpgroup: a register fewer at hd256).
  const uint32_t q_group = GROUPS == 1 ? qs : qs + (warp >> 2) * kWgRows * HD * 2;
  const ninfer_kv_cache& cache = a.cache;
  const int h = blockIdx.z, group = a.heads / cache.kv_heads, hd = cache.head_dim;
  const float qscale = a.scale * kLog2e;
  const ninfer_token_batch& b = a.batch;
  const int64_t ntiles = (te - tb + kRows - 1) / kRows;
  for (int64_t tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
    const int64_t t0 = tb + (ntiles - 1 - tile) * kRows; // latest tokens (the most keys) first
    const int64_t t1 = t0 + kRows < te ? t0 + kRows : te;
    for (int64_t s0 = t0; s0 < t1;) {
      const Segment sg = segment_at(b, cache, s0, t1);
      const int64_t s1 = sg.s1;
      int last[2];
      bool active[2];
      segment_rows(b, sg, t0, s0, warp, g, active, last);
      const int warp_first_last = __reduce_min_sync(kFullMask, min(last[0], last[1]));

      __syncthreads(); // every warp is done with the previous segment's q rows and tiles
      // q rows of [s0, s1) times scale * log2(e), rounded to In, zero elsewhere; thread i writes
      // the 8 elements at byte 16 i of the core-matrix tile (row-major order of core matrices).
      for (int i = threadIdx.x; i < kRows * HD / 8; i += kThreads) {
        const int2 at = wgmma::core_chunk<HD>(i); // q row, first dim
        const int64_t t = t0 + at.x;
        const float* src = t >= s0 && t < s1 ? a.q + t * a.q_token_stride + static_cast<int64_t>(h) * a.q_head_stride
                                             : nullptr;
        float x[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) x[e] = src && at.y + e < hd ? __ldg(src + at.y + e) * qscale : 0.f;
        *reinterpret_cast<uint4*>(smem + 16 * i) = make_uint4(In::pack(x[0], x[1]), In::pack(x[2], x[3]),
                                                              In::pack(x[4], x[5]), In::pack(x[6], x[7]));
      }

      MmaRows<HD> st;
      st.reset();
      const int kmax = sg.ok ? sg.last_pos : -1;
      const KvRows<T> kv = kv_rows<T>(cache, sg.ok ? sg.slot : 0, h / group);
      if (kv.vec) {
        // Tile i in pair i % 2; the copy of tile i + 1 is in flight while tile i is read.
        if (kmax >= 0) wg_copy_kv_async<T, HD, kThreads>(ks, ks + kTileBytes, kv, 0, kmax + 1 < kWgKeys ? kmax + 1 : kWgKeys);
        for (int key0 = 0, i = 0; key0 <= kmax; key0 += kWgKeys, ++i) {
          const int next = key0 + kWgKeys;
          if (next <= kmax) {
            const uint32_t nk = ks + ((i + 1) & 1) * kPairBytes;
            wg_copy_kv_async<T, HD, kThreads>(nk, nk + kTileBytes, kv, next, kmax + 1 - next < kWgKeys ? kmax + 1 - next : kWgKeys);
            cp_async_wait<1>(); // this thread's copies of tile i have landed
          } else {
            cp_async_wait<0>();
          }
          wgmma::fence_async_shared();
          __syncthreads(); // every thread's, and the q rows
          const uint32_t k = ks + (i & 1) * kPairBytes;
          attend_tile_wgmma<In, HD>(st, q_group, k, k + kTileBytes, key0, last, key0 + kWgKeys - 1 > warp_first_last,
                                    lane);
          __syncthreads(); // the warpgroup is done with tile i's pair
        }
      } else {
        for (int key0 = 0; key0 <= kmax; key0 += kWgKeys) {
          __syncthreads(); // the previous tile's products are done
          wg_stage_kv<In, HD, kThreads>(smem + kQBytes, smem + kQBytes + kTileBytes, kv, key0,
                              kmax + 1 - key0 < kWgKeys ? kmax + 1 - key0 : kWgKeys);
          wgmma::fence_async_shared();
          __syncthreads();
          attend_tile_wgmma<In, HD>(st, q_group, ks, ks + kTileBytes, key0, last, key0 + kWgKeys - 1 > warp_first_last,
                                    lane);
        }
      }

      store_rows(st, a, t0 + warp * 16 + g, h, active, lane & 3);
      s0 = s1;
    }
  }
}

} // namespace ninfer::cuda_plugin::attention
#endif // __CUDA_ARCH_FEAT_SM90_ALL

namespace ninfer::cuda_plugin::attention {
// The kernel body where wgmma exists; elsewhere the entry points are empty (every build compiles
// the same kernels; only the sm_90a plugin registers these).
template <class In, int HD, int GROUPS>
__device__ __forceinline__ void prefill_wgmma_entry(const ninfer_attention_args& a, int64_t b, int64_t e) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  prefill_wgmma_tiles<In, HD, GROUPS>(a, b, e);
#endif
}
} // namespace ninfer::cuda_plugin::attention
