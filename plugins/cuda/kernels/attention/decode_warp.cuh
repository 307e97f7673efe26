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
// after the first find them there. No shared memory, no barrier inside the key loop.
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

// Keys [key0, key0 + nkeys) (nkeys <= 32; every one visible to every row: a decode token sees all
// keys up to its position) through the warp's rows. q: the pass's R rows in shared memory, [R][HD],
// pre-scaled, zero past head_dim and in rows past the group. key0 is a multiple of kKeysPerTile,
// so the tile lies in one KV block (tile.cuh, KvRows).
template <class E, int HD, int R>
__device__ void warp_tile(RowState<HD, R>& st, const float* q, const KvRows<E>& slot_rows, int key0, int nkeys,
                          int lane) {
  constexpr int kDims = RowState<HD, R>::kDimsPerLane;
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
#pragma unroll
        for (int c = 0; c < kVec; c += 4)
#pragma unroll
          for (int i = 0; i < R; ++i) {
            const float4 q4 = *reinterpret_cast<const float4*>(q + i * HD + (v0 + b) * kVec + c);
            s[i] = fmaf(q4.x, kf[c], s[i]);
            s[i] = fmaf(q4.y, kf[c + 1], s[i]);
            s[i] = fmaf(q4.z, kf[c + 2], s[i]);
            s[i] = fmaf(q4.w, kf[c + 3], s[i]);
          }
      }
    }
  } else if (has_key) {
    for (int d = 0; d < kv.head_dim; ++d) {
      const float kd = KvElem<E>::load(krow + d);
#pragma unroll
      for (int i = 0; i < R; ++i) s[i] = fmaf(q[i * HD + d], kd, s[i]);
    }
  }

  // Online softmax: p[i] is this lane's key's weight in row i, relative to the new running max.
  float p[R];
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const float si = has_key ? s[i] : -INFINITY;
    const float m_new = fmaxf(st.m[i], warp_max(si)); // finite: the tile has at least one key
    const float alpha = expf(st.m[i] - m_new);         // 0 on the warp's first tile
    p[i] = has_key ? expf(si - m_new) : 0.f;
    st.l[i] = st.l[i] * alpha + p[i];
#pragma unroll
    for (int k = 0; k < kDims; ++k) st.acc[i][k] *= alpha;
    st.m[i] = m_new;
  }

  // Values: key j's row, this lane's dims, a batch of keys' loads in flight (raw words, about 32
  // registers; widened as they are used).
  const int d0 = lane * kDims;
  const bool has_dims = d0 < kv.head_dim;
  using Piece = KvPiece<E, kDims>;
  constexpr int kKeysInFlight = 32 / Piece::kWords < 16 ? 32 / Piece::kWords : 16;
  const E* vbase = kv.v + d0;
#pragma unroll 1
  for (int j0 = 0; j0 < nkeys; j0 += kKeysInFlight) {
    Piece raw[kKeysInFlight];
    if (kv.vec) {
#pragma unroll
      for (int b = 0; b < kKeysInFlight; ++b) {
        if (j0 + b < nkeys && has_dims) raw[b].load(vbase + (j0 + b) * kv.pos_stride);
        else raw[b].zero();
      }
    }
#pragma unroll
    for (int b = 0; b < kKeysInFlight; ++b) {
      const int j = j0 + b;
      if (j >= nkeys) break; // warp-uniform
      float v[kDims];
      if (kv.vec) {
        raw[b].widen(v);
      } else {
#pragma unroll
        for (int k = 0; k < kDims; ++k)
          v[k] = d0 + k < kv.head_dim ? KvElem<E>::load(vbase + j * kv.pos_stride + k) : 0.f;
      }
#pragma unroll
      for (int i = 0; i < R; ++i) {
        const float pj = __shfl_sync(kFullMask, p[i], j);
#pragma unroll
        for (int k = 0; k < kDims; ++k) st.acc[i][k] = fmaf(pj, v[k], st.acc[i][k]);
      }
    }
  }
}

// Requests tile [key0, key0 + nkeys)'s K and V rows into L2 (lane j: key j's rows).
template <class E>
__device__ __forceinline__ void prefetch_tile(const KvRows<E>& slot_rows, int key0, int nkeys, int lane) {
  if (nkeys <= 0) return;
  const KvRows<E> kv = slot_rows.tile(key0);
  if (lane >= nkeys) return;
  const int64_t off = static_cast<int64_t>(lane) * kv.pos_stride;
  const int bytes = kv.head_dim * static_cast<int>(sizeof(E));
  prefetch_l2(kv.k + off, bytes);
  prefetch_l2(kv.v + off, bytes);
}

} // namespace ninfer::cuda_plugin::attention
