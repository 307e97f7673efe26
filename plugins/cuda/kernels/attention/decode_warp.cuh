// The key-owning split-KV decode's unit of work (attention/decode_keys.cuh): one warp, R query
// rows of one kv head, its own 32-key tiles read straight from the cache.
//
// Why warps own keys for hd256: with warps owning rows (attention/decode_rows.cuh) a Qwen3.5-27B
// CTA (group of 6) waited on one shared tile at a time, two barriers per tile, its FMAs stalled
// on shared-memory loads (ncu on the H200: 46 us per layer at 4,096 keys). Here
// each warp takes different tiles with all of the group's rows, so the CTA's memory round trips
// run side by side, and the warps meet once, at the end. On the H200 this took the 27B from 69.5
// to 70.7 tok/s at context 4096; for Qwen3-8B's hd128 it is slower (docs/performance.md).
//
// Work split inside a warp:
//   scores  lane j reads key j's row straight from global memory (16-byte vectors, a batch in
//           flight) and dots it with every row's q, read from shared memory as float4 broadcasts;
//   values  lane l owns kDims = HD / 32 consecutive output dims, so one key's value row is one
//           coalesced load of the warp; a key's probability comes from the lane that scored it.
// Both rows of a tile (K and V) are requested into L2 when the tile starts, so the batched loads
// after the first find them there. No shared memory, no barrier inside the key loop. The online
// softmax and the value loop (tile_softmax, tile_values) serve the compact caches' tiles too
// (attention/decode_warp_codes.cuh), which read codes where this file reads 16-bit elements.
#pragma once

#include "attention/tile.cuh"

namespace ninfer::cuda_plugin::attention {

// The raw 32-bit words of N consecutive elements at p: one 4-, 8- or 16-byte load, or several
// 16-byte ones. p must be aligned to min(16, N * sizeof(E)) bytes.
template <class E, int N>
struct KvPiece {
  static constexpr int kWords = N * static_cast<int>(sizeof(E)) / 4;
  static_assert(kWords == 1 || kWords == 2 || kWords % 4 == 0, "a 4-, 8- or 16k-byte piece");
  uint32_t w[kWords];

  __device__ __forceinline__ void load(const E* p) {
    if constexpr (kWords % 4 == 0) {
#pragma unroll
      for (int i = 0; i < kWords / 4; ++i) {
        const uint4 u = __ldg(reinterpret_cast<const uint4*>(p) + i);
        w[4 * i] = u.x, w[4 * i + 1] = u.y, w[4 * i + 2] = u.z, w[4 * i + 3] = u.w;
      }
    } else if constexpr (kWords == 2) {
      const uint2 u = __ldg(reinterpret_cast<const uint2*>(p));
      w[0] = u.x, w[1] = u.y;
    } else {
      w[0] = __ldg(reinterpret_cast<const unsigned int*>(p));
    }
  }
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int i = 0; i < kWords; ++i) w[i] = 0u;
  }
  __device__ __forceinline__ void widen(float (&f)[N]) const {
#pragma unroll
    for (int i = 0; i < kWords; ++i) KvWord<E>::widen(w[i], f + i * KvWord<E>::n);
  }
};

// Asks L2 for the `bytes` at p (a hint: no registers, no wait).
__device__ __forceinline__ void prefetch_l2(const void* p, int bytes) {
  const char* c = static_cast<const char*>(p);
  for (int off = 0; off < bytes; off += 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(c + off));
}

// A warp's online-softmax state is attention/tile.cuh's RowState: m warp-uniform, l this lane's
// share of each row's sum. Only the dims a lane's acc holds differ: here lane l's kDimsPerLane
// consecutive dims l * kDimsPerLane + k (the prefill's are l + 32 k).

// s[i] += (dims [d, d + N) of q row i) . f for the pass's R rows: q from shared memory as float4
// broadcasts (every lane reads the same address), one FMA chain per row.
template <int HD, int R, int N>
__device__ __forceinline__ void dot_rows(float (&s)[R], const float* q, int d, const float (&f)[N]) {
#pragma unroll
  for (int c = 0; c < N; c += 4)
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const float4 q4 = *reinterpret_cast<const float4*>(q + i * HD + d + c);
      s[i] = fmaf(q4.x, f[c], s[i]);
      s[i] = fmaf(q4.y, f[c + 1], s[i]);
      s[i] = fmaf(q4.z, f[c + 2], s[i]);
      s[i] = fmaf(q4.w, f[c + 3], s[i]);
    }
}

// One tile's online-softmax step, shared by every cache's warp_tile: s[i] is this lane's key's
// score in row i (ignored without a key); p[i] becomes its weight relative to the new running
// max, and the rows' sums and accumulators are rescaled to that max.
template <int HD, int R>
__device__ __forceinline__ void tile_softmax(RowState<HD, R>& st, const float (&s)[R], bool has_key, float (&p)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const float si = has_key ? s[i] : -INFINITY;
    const float m_new = fmaxf(st.m[i], warp_max(si)); // finite: the tile has at least one key
    const float alpha = expf(st.m[i] - m_new);         // 0 on the warp's first tile
    p[i] = has_key ? expf(si - m_new) : 0.f;
    st.l[i] = st.l[i] * alpha + p[i];
#pragma unroll
    for (int k = 0; k < RowState<HD, R>::kDimsPerLane; ++k) st.acc[i][k] *= alpha;
    st.m[i] = m_new;
  }
}

// Values: adds p_j times key j's value row (this lane's kDimsPerLane dims) for keys [0, nkeys)
// of the tile, the weights broadcast from the lanes that scored them. `src` reads the rows:
// load(raw, j, in) issues key j's loads (in: j is one of the tile's keys), widen(raw, j, v) gives
// its dims and returns the factor its weight takes (Src::kScaled; a compact row's scale). The
// loads of Src::kKeysInFlight keys are issued before any is widened.
template <int HD, int R, class Src>
__device__ __forceinline__ void tile_values(RowState<HD, R>& st, const float (&p)[R], const Src& src, int nkeys) {
  constexpr int kDims = RowState<HD, R>::kDimsPerLane, kKeys = Src::kKeysInFlight;
#pragma unroll 1
  for (int j0 = 0; j0 < nkeys; j0 += kKeys) {
    typename Src::Raw raw[kKeys];
#pragma unroll
    for (int b = 0; b < kKeys; ++b) src.load(raw[b], j0 + b, j0 + b < nkeys);
#pragma unroll
    for (int b = 0; b < kKeys; ++b) {
      const int j = j0 + b;
      if (j >= nkeys) break; // warp-uniform
      float v[kDims];
      const float f = src.widen(raw[b], j, v);
#pragma unroll
      for (int i = 0; i < R; ++i) {
        float pj = __shfl_sync(kFullMask, p[i], j);
        if constexpr (Src::kScaled) pj *= f;
#pragma unroll
        for (int k = 0; k < kDims; ++k) st.acc[i][k] = fmaf(pj, v[k], st.acc[i][k]);
      }
    }
  }
}

// A 16- or 32-bit cache's value rows as tile_values reads them: lane l's kDims consecutive dims
// from d0 = l * kDims, one vector load per key (raw words, about 32 registers for the keys in
// flight; widened as they are used), or scalar loads where rows are not vectors.
template <class E, int kDims>
struct LaneValues {
  using Raw = KvPiece<E, kDims>;
  static constexpr int kKeysInFlight = 32 / Raw::kWords < 16 ? 32 / Raw::kWords : 16;
  static constexpr bool kScaled = false;
  const E* base; // the tile's first key's row at dim d0
  int64_t pos_stride;
  int d0, head_dim;
  bool vec;

  __device__ LaneValues(const KvRows<E>& kv, int lane)
      : base(kv.v + lane * kDims), pos_stride(kv.pos_stride), d0(lane * kDims), head_dim(kv.head_dim), vec(kv.vec) {}
  __device__ __forceinline__ void load(Raw& raw, int j, bool in) const {
    if (!vec) return;
    if (in && d0 < head_dim) raw.load(base + j * pos_stride);
    else raw.zero();
  }
  __device__ __forceinline__ float widen(const Raw& raw, int j, float (&v)[kDims]) const {
    if (vec) {
      raw.widen(v);
    } else {
#pragma unroll
      for (int k = 0; k < kDims; ++k) v[k] = d0 + k < head_dim ? KvElem<E>::load(base + j * pos_stride + k) : 0.f;
    }
    return 1.f;
  }
};

// Keys [key0, key0 + nkeys) (nkeys <= 32; every one visible to every row: a decode token sees all
// keys up to its position) through the warp's rows. q: the pass's R rows in shared memory, [R][HD],
// pre-scaled, zero past head_dim and in rows past the group. key0 is a multiple of kKeysPerTile,
// so the tile lies in one KV block (tile.cuh, KvRows).
template <class E, int HD, int R>
__device__ void warp_tile(RowState<HD, R>& st, const float* q, const KvRows<E>& slot_rows, int key0, int nkeys,
                          int lane) {
  const bool has_key = lane < nkeys;
  const KvRows<E> kv = slot_rows.tile(key0);
  const E* krow = kv.k + static_cast<int64_t>(lane) * kv.pos_stride;

  // Scores: lane j's key against every row, R independent FMA chains.
  float s[R];
#pragma unroll
  for (int i = 0; i < R; ++i) s[i] = 0.f;
  if (kv.vec) {
    constexpr int kVec = KvElem<E>::kVec, kVecs = HD / kVec;
    constexpr int kBatch = kVecs < 8 ? kVecs : 8; // 16-byte loads in flight per lane
    const int vecs = kv.head_dim / kVec;
#pragma unroll 1
    for (int v0 = 0; v0 < kVecs; v0 += kBatch) {
      uint4 raw[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b)
        raw[b] = has_key && v0 + b < vecs ? __ldg(reinterpret_cast<const uint4*>(krow) + v0 + b)
                                          : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        float kf[kVec];
        KvElem<E>::widen(raw[b], kf);
        dot_rows<HD>(s, q, (v0 + b) * kVec, kf);
      }
    }
  } else if (has_key) {
    for (int d = 0; d < kv.head_dim; ++d) {
      const float kd = KvElem<E>::load(krow + d);
#pragma unroll
      for (int i = 0; i < R; ++i) s[i] = fmaf(q[i * HD + d], kd, s[i]);
    }
  }

  float p[R];
  tile_softmax(st, s, has_key, p);
  tile_values(st, p, LaneValues<E, RowState<HD, R>::kDimsPerLane>(kv, lane), nkeys);
}

// Requests key j's K and V rows of a tile into L2.
template <class E>
__device__ __forceinline__ void prefetch_key(const KvRows<E>& tile, int j) {
  const int64_t off = static_cast<int64_t>(j) * tile.pos_stride;
  const int bytes = tile.head_dim * static_cast<int>(sizeof(E));
  prefetch_l2(tile.k + off, bytes);
  prefetch_l2(tile.v + off, bytes);
}

// Requests tile [key0, key0 + nkeys) into L2, lane j key j (prefetch_key of the cache's rows:
// KvRows here, KvCodeRows in attention/decode_warp_codes.cuh).
template <class Rows>
__device__ __forceinline__ void prefetch_tile(const Rows& slot_rows, int key0, int nkeys, int lane) {
  if (nkeys <= 0) return;
  const Rows kv = slot_rows.tile(key0);
  if (lane < nkeys) prefetch_key(kv, lane);
}

} // namespace ninfer::cuda_plugin::attention
