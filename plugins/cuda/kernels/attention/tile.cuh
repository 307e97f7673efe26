// Device building blocks of the attention kernels: shared-memory tiles, K/V tile loads and the
// per-warp online-softmax step over one key tile. Float32 arithmetic throughout (activations
// are float32, and the float32 path must match the CPU reference tightly); the cache is float32,
// float16 or bfloat16 (KvElem), widened exactly to float32 as its tiles are staged, so the
// tiles and the arithmetic on them are the same for every cache dtype (the compact formats'
// codes are staged into the same tiles by attention/kv_compact.cuh).
//
// Work split inside a warp (kKeysPerTile = 32 keys per tile):
//   scores  lane j computes the scores of key j against the warp's rows (q rows are read from
//           shared memory as float4 broadcasts, key j's row as float4s);
//   values  lane l accumulates output dims l, l+32, ... of every row, taking each key's
//           probability from the lane that scored it (shuffle).
// The running max is warp-uniform; each lane keeps its own share of the running sum, summed
// once at the end.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "attention/shapes.hpp"
#include "ninfer/abi/ops/attention.h"

namespace ninfer::cuda_plugin::attention {

constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, off));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFullMask, v, off);
  return v;
}

// The three tiles of one CTA, carved from its dynamic shared memory (layout: smem_bytes()).
template <int HD, int ROWS>
struct Tiles {
  static constexpr int kStrideK = HD + 4;
  float* q; // [ROWS][HD], pre-scaled, zero past head_dim and in unused rows
  float* k; // [kKeysPerTile][HD + 4]
  float* v; // [kKeysPerTile][HD]
  __device__ explicit Tiles(unsigned char* base)
      : q(reinterpret_cast<float*>(base)), k(q + ROWS * HD), v(k + kKeysPerTile * kStrideK) {}
};

// Elements of a cache dtype in one 32-bit word, widened exactly to float32.
template <class E>
struct KvWord;
template <>
struct KvWord<float> {
  static constexpr int n = 1;
  __device__ static void widen(uint32_t w, float* f) { f[0] = __uint_as_float(w); }
};
template <>
struct KvWord<__half> {
  static constexpr int n = 2;
  __device__ static void widen(uint32_t w, float* f) {
    const float2 p = __half22float2(*reinterpret_cast<const __half2*>(&w));
    f[0] = p.x;
    f[1] = p.y;
  }
};
template <>
struct KvWord<__nv_bfloat16> {
  static constexpr int n = 2;
  __device__ static void widen(uint32_t w, float* f) { // bfloat16: the high half of a float32
    f[0] = __uint_as_float(w << 16);
    f[1] = __uint_as_float(w & 0xffff0000u);
  }
};

// A cache element type: its 16-byte vector (kVec elements, as a uint4) widened to floats, word by
// word (KvWord), and one element widened. Widening a half or a bfloat16 is exact.
template <class E>
struct KvElem {
  static constexpr int kVec = 4 * KvWord<E>::n;
  __device__ static float load(const E* p);
  __device__ static void widen(const uint4& r, float (&f)[kVec]) {
    KvWord<E>::widen(r.x, f);
    KvWord<E>::widen(r.y, f + KvWord<E>::n);
    KvWord<E>::widen(r.z, f + 2 * KvWord<E>::n);
    KvWord<E>::widen(r.w, f + 3 * KvWord<E>::n);
  }
};
template <>
__device__ inline float KvElem<float>::load(const float* p) { return __ldg(p); }
template <>
__device__ inline float KvElem<__half>::load(const __half* p) { return __half2float(__ldg(p)); }
template <>
__device__ inline float KvElem<__nv_bfloat16>::load(const __nv_bfloat16* p) { return __bfloat162float(__ldg(p)); }

// Where the keys of one (slot, kv head) live in the paged cache (ninfer/abi/ops/kv_append.h):
// the slot's row of the block table, and k / v at the kv head's elements of the pool's first row.
// tile(key0) gives the rows of one key tile: key key0 + j at k + j * pos_stride. Every kernel
// addresses the cache through it (or row() for one position), so this is the one address rule
// of the CUDA kernels. A tile's keys must lie in one block: the kernels' tiles are 16 or 32 keys
// starting at a multiple of their size (split-KV chunks start at multiples of kKeysPerTile), and
// block_tokens is a power of two >= NINFER_ATTENTION_TILE_BLOCK_TOKENS (the launch checks it).
template <class E>
struct KvRows {
  const E* k;
  const E* v;
  int64_t pos_stride;
  int head_dim;
  bool vec; // head_dim a multiple of the 16-byte vector and 16-byte aligned rows: vector loads
  const int32_t* table; // the slot's blocks_per_slot entries
  int block_shift;      // log2(block_tokens)

  // Elements from the pool's first row to position p's row (the table entry of p's block must
  // name a block of the pool: the caller reads only positions the sequence holds).
  __device__ __forceinline__ int64_t row_offset(int p) const {
    const int64_t block = __ldg(table + (p >> block_shift));
    return ((block << block_shift) + (p & ((1 << block_shift) - 1))) * pos_stride;
  }
  // The rows of the key tile that starts at key0 (its keys all in key0's block).
  __device__ __forceinline__ KvRows tile(int key0) const {
    KvRows r = *this;
    const int64_t off = row_offset(key0);
    r.k += off;
    r.v += off;
    return r;
  }
};

// Whether a cache's rows are whole 16-byte vectors (head_dim a multiple of the 16 / elem_bytes
// elements of one, K and V 16-byte aligned; every head's row then is too): the vector loads.
// Host and device: the decode's launch picks the tensor-core kernel, which copies 16-byte
// vectors, by it.
__host__ __device__ inline bool kv_vector_rows(const ninfer_kv_cache& c, int elem_bytes) {
  return ((reinterpret_cast<uintptr_t>(c.k) | reinterpret_cast<uintptr_t>(c.v)) & 15u) == 0 &&
         c.head_dim % (16 / elem_bytes) == 0;
}

template <class E>
__device__ inline KvRows<E> kv_rows(const ninfer_kv_cache& c, int slot, int kv_head) {
  const int64_t pos_stride = static_cast<int64_t>(c.kv_heads) * c.head_dim;
  const int64_t base = static_cast<int64_t>(kv_head) * c.head_dim;
  return {static_cast<const E*>(c.k) + base,
          static_cast<const E*>(c.v) + base,
          pos_stride,
          c.head_dim,
          kv_vector_rows(c, sizeof(E)),
          c.block_table + static_cast<int64_t>(slot) * c.blocks_per_slot,
          __ffs(c.block_tokens) - 1};
}

// Vector i of a K/V tile as the CTA's thread share it out: key j, first dim d.
template <class E, int HD>
struct TileVec {
  static constexpr int kVec = KvElem<E>::kVec, kPerRow = HD / kVec;
  int j, d;
  __device__ explicit TileVec(int i) : j(i / kPerRow), d((i % kPerRow) * kVec) {}
};

// Raw 16-byte vectors of the tile's key j, dims [d, d + kVec) of K and V; zero past the tile's
// keys and past head_dim (widened: +0). `tile`: the tile's rows (KvRows::tile).
template <class E, int HD>
__device__ __forceinline__ void fetch_vec(const KvRows<E>& tile, int nkeys, const TileVec<E, HD>& at, uint4& kr,
                                          uint4& vr) {
  kr = vr = make_uint4(0u, 0u, 0u, 0u);
  if (at.j < nkeys && at.d < tile.head_dim) {
    const KvRows<E>& kv = tile;
    const int64_t off = static_cast<int64_t>(at.j) * kv.pos_stride + at.d;
    kr = __ldg(reinterpret_cast<const uint4*>(kv.k + off));
    vr = __ldg(reinterpret_cast<const uint4*>(kv.v + off));
  }
}

// Widens a fetched K and V vector into the float tiles.
template <class E, int HD, int ROWS>
__device__ __forceinline__ void store_vec(const Tiles<HD, ROWS>& t, const TileVec<E, HD>& at, const uint4& kr,
                                          const uint4& vr) {
  constexpr int kVec = KvElem<E>::kVec;
  float kf[kVec], vf[kVec];
  KvElem<E>::widen(kr, kf);
  KvElem<E>::widen(vr, vf);
#pragma unroll
  for (int q = 0; q < kVec; q += 4) {
    *reinterpret_cast<float4*>(t.k + at.j * Tiles<HD, ROWS>::kStrideK + at.d + q) =
        make_float4(kf[q], kf[q + 1], kf[q + 2], kf[q + 3]);
    *reinterpret_cast<float4*>(t.v + at.j * HD + at.d + q) = make_float4(vf[q], vf[q + 1], vf[q + 2], vf[q + 3]);
  }
}

// Loads keys [key0, key0 + nkeys) into the K and V tiles and zeroes the rest: a zero row
// keeps the product p * v of a masked key finite even where the cache holds NaN (positions
// never written). Every thread of the CTA takes part; a thread issues the loads of a batch
// before storing any, so they are in flight together (batches bound the staging registers).
template <class E, int HD, int ROWS, int THREADS>
__device__ void load_kv_tile(const Tiles<HD, ROWS>& t, const KvRows<E>& slot_rows, int key0, int nkeys) {
  const KvRows<E> kv = slot_rows.tile(key0);
  if (kv.vec) {
    constexpr int kIters = kKeysPerTile * TileVec<E, HD>::kPerRow / THREADS;
    constexpr int kBatch = kIters < 4 ? kIters : 4;
    static_assert(kKeysPerTile * TileVec<E, HD>::kPerRow % THREADS == 0 && kIters % kBatch == 0,
                  "tile must split evenly over the CTA");
#pragma unroll 1
    for (int it0 = 0; it0 < kIters; it0 += kBatch) {
      uint4 kr[kBatch], vr[kBatch];
#pragma unroll
      for (int it = 0; it < kBatch; ++it)
        fetch_vec<E, HD>(kv, nkeys, TileVec<E, HD>(threadIdx.x + (it0 + it) * THREADS), kr[it], vr[it]);
#pragma unroll
      for (int it = 0; it < kBatch; ++it)
        store_vec<E, HD, ROWS>(t, TileVec<E, HD>(threadIdx.x + (it0 + it) * THREADS), kr[it], vr[it]);
    }
  } else {
    for (int i = threadIdx.x; i < kKeysPerTile * HD; i += THREADS) {
      const int j = i / HD, d = i % HD;
      float kx = 0.f, vx = 0.f;
      if (j < nkeys && d < kv.head_dim) {
        const int64_t off = static_cast<int64_t>(j) * kv.pos_stride + d;
        kx = KvElem<E>::load(kv.k + off);
        vx = KvElem<E>::load(kv.v + off);
      }
      t.k[j * Tiles<HD, ROWS>::kStrideK + d] = kx;
      t.v[j * HD + d] = vx;
    }
  }
}

// A whole K/V tile held in registers between its loads and its stores, so the loads of the
// next tile are in flight while the CTA computes on the current one (the split-KV decode with a
// 16-bit cache, vector path only). kIters 16-byte vectors of K and of V per thread: 2 + 2 at
// hd128 with the decode's 256 threads (16 registers), 4 + 4 at hd256.
template <class E, int HD, int THREADS>
struct KvTileInFlight {
  static constexpr int kIters = kKeysPerTile * TileVec<E, HD>::kPerRow / THREADS;
  static_assert(kKeysPerTile * TileVec<E, HD>::kPerRow % THREADS == 0, "tile must split evenly over the CTA");
  uint4 k[kIters], v[kIters];

  __device__ void fetch(const KvRows<E>& slot_rows, int key0, int nkeys) {
    const KvRows<E> kv = slot_rows.tile(key0);
#pragma unroll
    for (int it = 0; it < kIters; ++it) fetch_vec<E, HD>(kv, nkeys, TileVec<E, HD>(threadIdx.x + it * THREADS), k[it], v[it]);
  }
  template <int ROWS>
  __device__ void store(const Tiles<HD, ROWS>& t) const {
#pragma unroll
    for (int it = 0; it < kIters; ++it) store_vec<E, HD, ROWS>(t, TileVec<E, HD>(threadIdx.x + it * THREADS), k[it], v[it]);
  }
};

// Copies query row `src` (head_dim floats, any alignment; null: an unused row) into the q tile
// row `dst`, times `scale`, zero past head_dim. Called by `nthreads` threads, thread `tid`.
template <int HD>
__device__ void load_q_row(float* dst, const float* src, int head_dim, float scale, int tid, int nthreads) {
  for (int d = tid; d < HD; d += nthreads) dst[d] = src && d < head_dim ? __ldg(src + d) * scale : 0.f;
}

// Online-softmax state of one warp's R rows: the prefill's kRowsPerWarp, the row-owning decode's
// one or two (as many as its GQA group needs), the key-owning decode's pass of 4 or 8
// (attention/decode_warp.cuh, whose lanes hold consecutive dims lane * kDimsPerLane + k instead).
template <int HD, int R = kRowsPerWarp>
struct RowState {
  static constexpr int kDimsPerLane = HD / 32;
  float m[R];                    // running max (warp-uniform), -inf before any key
  float l[R];                    // this lane's share of the running sum of weights
  float acc[R][kDimsPerLane];    // unnormalised output dims lane + 32 k

  __device__ void reset() {
#pragma unroll
    for (int i = 0; i < R; ++i) {
      m[i] = -INFINITY;
      l[i] = 0.f;
#pragma unroll
      for (int k = 0; k < kDimsPerLane; ++k) acc[i][k] = 0.f;
    }
  }
  // The row's total weight (all lanes get it).
  __device__ float total(int i) const { return warp_sum(l[i]); }
};

// One key tile against the warp's rows. Row i reads q tile row `row[i]` and may see keys at
// positions <= last[i] (-1: the row is unused and keeps its state). The tile holds keys
// [key0, key0 + nkeys).
//
// Scores: each row's dot product runs in C = 4 / R independent chains (one per float4 component
// when R = 1), so a warp with few rows still has four FMAs in flight instead of one chain of
// head_dim dependent ones; with kRowsPerWarp rows (prefill) it is the plain sequential sum.
template <int HD, int ROWS, int R>
__device__ void attend_tile(RowState<HD, R>& st, const Tiles<HD, ROWS>& t, const int (&row)[R], const int (&last)[R],
                            int key0, int nkeys, int lane) {
  constexpr int DPL = RowState<HD, R>::kDimsPerLane, C = R >= 4 ? 1 : 4 / R;
  float s[R];
  {
    float part[R][C];
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
      for (int c = 0; c < C; ++c) part[i][c] = 0.f;
    if (lane < nkeys) {
      const float* krow = t.k + lane * Tiles<HD, ROWS>::kStrideK;
#pragma unroll 2
      for (int d = 0; d < HD; d += 4) {
        const float4 k4 = *reinterpret_cast<const float4*>(krow + d);
#pragma unroll
        for (int i = 0; i < R; ++i) {
          const float4 q4 = *reinterpret_cast<const float4*>(t.q + row[i] * HD + d);
          part[i][0 % C] = fmaf(q4.x, k4.x, part[i][0 % C]);
          part[i][1 % C] = fmaf(q4.y, k4.y, part[i][1 % C]);
          part[i][2 % C] = fmaf(q4.z, k4.z, part[i][2 % C]);
          part[i][3 % C] = fmaf(q4.w, k4.w, part[i][3 % C]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < R; ++i) {
      s[i] = part[i][0];
#pragma unroll
      for (int c = 1; c < C; ++c) s[i] += part[i][c];
    }
  }

  const int key = key0 + lane;
  float p[R];
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const bool valid = lane < nkeys && key <= last[i];
    const float si = valid ? s[i] : -INFINITY;
    const float m_new = fmaxf(st.m[i], warp_max(si));
    p[i] = 0.f;
    if (m_new == -INFINITY) continue; // nothing visible yet (warp-uniform)
    const float alpha = expf(st.m[i] - m_new); // 0 on the row's first visible tile
    p[i] = valid ? expf(si - m_new) : 0.f;
    st.l[i] = st.l[i] * alpha + p[i];
#pragma unroll
    for (int k = 0; k < DPL; ++k) st.acc[i][k] *= alpha;
    st.m[i] = m_new;
  }

#pragma unroll 4
  for (int j = 0; j < nkeys; ++j) {
    float v[DPL];
#pragma unroll
    for (int k = 0; k < DPL; ++k) v[k] = t.v[j * HD + lane + 32 * k];
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const float pj = __shfl_sync(kFullMask, p[i], j);
#pragma unroll
      for (int k = 0; k < DPL; ++k) st.acc[i][k] = fmaf(pj, v[k], st.acc[i][k]);
    }
  }
}

// Writes row i's normalised output (head_dim floats at `dst`); NaN when it saw no key, which
// only happens for a token whose slot or position lies outside the cache.
template <int HD, int R>
__device__ void store_row(const RowState<HD, R>& st, int i, float* dst, int head_dim, int lane) {
  const float total = st.total(i);
#pragma unroll
  for (int k = 0; k < RowState<HD, R>::kDimsPerLane; ++k) {
    const int d = lane + 32 * k;
    if (d < head_dim) dst[d] = total > 0.f ? st.acc[i][k] / total : __int_as_float(0x7fc00000);
  }
}

// Whether a token's (slot, position) lies inside the cache; tokens outside it get NaN rows.
__device__ inline bool in_cache(const ninfer_kv_cache& c, int slot, int pos) {
  return slot >= 0 && slot < c.slots && pos >= 0 && pos < c.capacity;
}

// A prefill CTA's tokens of one sequence, from token s0 of its tile [.., t1): [s0, s1), at
// consecutive positions of `slot`, the last at last_pos; ok: both ends lie in the cache (the
// segment's rows are NaN otherwise).
struct Segment {
  int64_t s1;
  int slot, last_pos;
  bool ok;
};

__device__ inline Segment segment_at(const ninfer_token_batch& b, const ninfer_kv_cache& c, int64_t s0, int64_t t1) {
  const int seq = b.token_seq[s0];
  const int64_t seq_end = b.seq_start[seq + 1];
  Segment g;
  g.s1 = seq_end < t1 && seq_end > s0 ? seq_end : t1;
  g.slot = b.seq_slot[seq];
  g.last_pos = b.token_pos[g.s1 - 1];
  g.ok = in_cache(c, g.slot, b.token_pos[s0]) && in_cache(c, g.slot, g.last_pos);
  return g;
}

} // namespace ninfer::cuda_plugin::attention
