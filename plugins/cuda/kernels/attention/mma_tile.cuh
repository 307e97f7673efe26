// The per-warp step of flash attention 2 on tensor cores, shared by the tensor-core prefill
// (attention/prefill_mma.cu) and the tensor-core split-KV decode (attention/decode_mma.cuh): a
// warp's 16 query rows against one K/V tile of 16-bit elements in shared memory, S = Q K^T and
// P V on m16n8k16 MMAs with the online softmax in registers between them (log2 domain: q arrives
// multiplied by scale * log2(e)).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "attention/mma.cuh"
#include "attention/tile.cuh"

namespace ninfer::cuda_plugin::attention {

constexpr float kLog2e = 1.4426950408889634f;

// 16-bit elements per shared-memory row: head dims plus 8, so the 8 rows one ldmatrix reads fall
// in distinct banks (row pitch 16 bytes past a multiple of 128).
__host__ __device__ constexpr int mma_pitch(int hd) { return hd + 8; }

// Online-softmax state of one thread: rows g and g + 8 of its warp's 16, output dims
// 8 n + 2c, 8 n + 2c + 1 of each (the C fragment layout).
template <int HD>
struct MmaRows {
  float o[HD / 8][4]; // unnormalised output
  float m[2];         // running max (log2 domain), -inf before any visible key
  float l[2];         // this thread's share of the running sum of weights

  __device__ void reset() {
#pragma unroll
    for (int n = 0; n < HD / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[n][e] = 0.f;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
  }
  // Row g + 8 i's total weight: the sum of its 4 lanes' shares (all 4 get it; the whole warp
  // calls it).
  __device__ float total(int i) const {
    float t = l[i];
    t += __shfl_xor_sync(kFullMask, t, 1);
    return t + __shfl_xor_sync(kFullMask, t, 2);
  }
};

// A tensor-core prefill thread's rows g and g + 8 of its warp's 16 (tokens t0 + 16 warp + g + 8 i)
// within the segment: whether each is the segment's, and the last key position it may see (-1:
// none).
__device__ __forceinline__ void segment_rows(const ninfer_token_batch& b, const Segment& sg, int64_t t0, int64_t s0,
                                             int warp, int g, bool (&active)[2], int (&last)[2]) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t t = t0 + warp * 16 + g + 8 * i;
    active[i] = t >= s0 && t < sg.s1;
    last[i] = active[i] && sg.ok ? b.token_pos[t] : -1;
  }
}

// Normalises and stores this thread's share of rows g and g + 8 (`row0`: row g's token): row sums
// from the row's 4 threads (the whole warp calls it); NaN for a row that saw no key (only a token
// whose slot or position lies outside the cache).
template <int HD>
__device__ __forceinline__ void store_rows(const MmaRows<HD>& st, const ninfer_attention_args& a, int64_t row0, int h,
                                           const bool (&active)[2], int c) {
  const int hd = a.cache.head_dim;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float l = st.total(i);
    if (!active[i]) continue;
    const float inv = l > 0.f ? 1.f / l : __int_as_float(0x7fc00000);
    float* dst = a.out + (row0 + 8 * i) * a.out_token_stride + static_cast<int64_t>(h) * hd;
#pragma unroll
    for (int n = 0; n < HD / 8; ++n) {
      const int d = n * 8 + 2 * c;
      if (d < hd) dst[d] = st.o[n][2 * i] * inv;
      if (d + 1 < hd) dst[d + 1] = st.o[n][2 * i + 1] * inv;
    }
  }
}

// This lane's ldmatrix row addresses in the q tile (the warp's rows), K tile and V tile; the
// loops below add constant offsets.
struct LaneAddrs {
  uint32_t q, k, v;
};

template <int HD, class T>
__device__ LaneAddrs lane_addrs(const T* qw, const T* ks, const T* vs, int lane) {
  constexpr int P = mma_pitch(HD);
  const int r = lane & 7, mi = lane >> 3;
  // q: A fragment, matrices (rows 0-7 | 8-15) x (dims 0-7 | 8-15), row half first.
  // K: B fragments of two 8-key tiles, matrices (keys 0-7 | 8-15) x (dims 0-7 | 8-15), dim half
  // first. V: B fragments (transposed) of two 8-dim tiles, matrices (keys 0-7 | 8-15) x (dims 0-7 |
  // 8-15), key half first.
  return {mma::smem_addr(qw + ((mi & 1) * 8 + r) * P + (mi >> 1) * 8),
          mma::smem_addr(ks + ((mi >> 1) * 8 + r) * P + (mi & 1) * 8),
          mma::smem_addr(vs + ((mi & 1) * 8 + r) * P + (mi >> 1) * 8)};
}

// The copy of copy_vec_async to shared-space addresses k_at and v_at (any tile layout).
template <class E>
__device__ __forceinline__ void copy_vec_async_to(uint32_t k_at, uint32_t v_at, const KvRows<E>& kv, int nkeys, int j,
                                                  int d) {
  const bool in = j < nkeys && d < kv.head_dim;
  const int64_t off = in ? static_cast<int64_t>(j) * kv.pos_stride + d : 0;
  const uint32_t bytes = in ? 16u : 0u;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(k_at), "l"(kv.k + off), "r"(bytes));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(v_at), "l"(kv.v + off), "r"(bytes));
}

// Starts copying dims [d, d + 16 bytes) of key j of the tile `kv` (KvRows::tile) for K and V into
// row j of ks and vs (pitch P elements) by cp.async; zeros where j >= nkeys or d >= head_dim (the
// copy then reads nothing). The caller commits the group.
template <class E>
__device__ __forceinline__ void copy_vec_async(E* ks, E* vs, const KvRows<E>& kv, int nkeys, int j, int d, int P) {
  copy_vec_async_to(mma::smem_addr(ks + j * P + d), mma::smem_addr(vs + j * P + d), kv, nkeys, j, d);
}

// The online-softmax step on one key tile's scores, shared by the mma.sync and the warpgroup-MMA
// kernels (their score fragments have one layout): s holds NT 8-key C fragments of this thread's
// rows g and g + 8 (lane column c). Masks keys past each row's last (when `mask`), rescales the
// output and sum by the change of each row's running max, and returns in mu the max the tile's
// weights are taken against. The row's 4 threads (same g) share the max.
template <int HD, int NT>
__device__ __forceinline__ void softmax_step(MmaRows<HD>& st, float (&s)[NT][4], int key0, const int (&last)[2],
                                             bool mask, int c, float (&mu)[2]) {
  if (mask) {
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (key0 + n * 8 + 2 * c + (e & 1) > last[e >> 1]) s[n][e] = -INFINITY;
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float mx = -INFINITY;
#pragma unroll
    for (int n = 0; n < NT; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * i], s[n][2 * i + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 2));
    const float m_new = fmaxf(st.m[i], mx);
    mu[i] = m_new == -INFINITY ? 0.f : m_new; // nothing visible yet: exp2(-inf - 0) = 0 below
    const float alpha = exp2f(st.m[i] - mu[i]);  // 0 on the row's first visible tile
    st.m[i] = m_new;
    st.l[i] *= alpha;
#pragma unroll
    for (int n = 0; n < HD / 8; ++n) {
      st.o[n][2 * i] *= alpha;
      st.o[n][2 * i + 1] *= alpha;
    }
  }
}

// The weights of keys 16 j .. 16 j + 15 rounded to In as the A fragment of P V (score tiles 2j and
// 2j + 1 are its two halves); the running sums add the rounded weights the MMA multiplies.
template <class In, int HD, int NT>
__device__ __forceinline__ void pack_weights(MmaRows<HD>& st, const float (&s)[NT][4], const float (&mu)[2], int j,
                                             uint32_t (&a)[4]) {
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const uint32_t p = In::pack(exp2f(s[2 * j + h][2 * i] - mu[i]), exp2f(s[2 * j + h][2 * i + 1] - mu[i]));
      st.l[i] += In::low(p) + In::high(p);
      a[2 * h + i] = p;
    }
}

// One key tile (keys key0 ...) against the warp's 16 rows. Row g may see keys at positions
// <= last[0], row g + 8 <= last[1] (-1: none); `mask` says whether any key of the tile lies
// past some row's position.
template <class In, int HD, int BC>
__device__ void attend_tile_mma(MmaRows<HD>& st, const LaneAddrs& ad, int key0, const int (&last)[2], bool mask,
                                int lane) {
  constexpr int NT = BC / 8, kRowBytes = mma_pitch(HD) * 2;
  const int c = lane & 3;

  // S = Q K^T: A from the q tile (ldmatrix), B from the K tile, whose key rows are the
  // columns of K^T (ldmatrix without transpose gives b0/b1 of two 8-key tiles).
  float s[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[n][e] = 0.f;
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
    uint32_t a[4];
    mma::ldsm_x4(a, ad.q + kk * 32);
#pragma unroll
    for (int n = 0; n < NT; n += 2) {
      uint32_t b[4];
      mma::ldsm_x4(b, ad.k + n * 8 * kRowBytes + kk * 32);
      In::mma(s[n], a, b[0], b[1]);
      In::mma(s[n + 1], a, b[2], b[3]);
    }
  }

  float mu[2];
  softmax_step(st, s, key0, last, mask, c, mu);

  // P V, 16 keys per step.
#pragma unroll
  for (int j = 0; j < BC / 16; ++j) {
    uint32_t a[4];
    pack_weights<In>(st, s, mu, j, a);
#pragma unroll
    for (int n = 0; n < HD / 8; n += 2) {
      uint32_t b[4];
      mma::ldsm_x4_trans(b, ad.v + j * 16 * kRowBytes + n * 16);
      In::mma(st.o[n], a, b[0], b[1]);
      In::mma(st.o[n + 1], a, b[2], b[3]);
    }
  }
}

} // namespace ninfer::cuda_plugin::attention
