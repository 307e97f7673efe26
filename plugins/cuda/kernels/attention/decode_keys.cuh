// The split-KV decode with warps owning keys (attention/decode.cu; head-dim classes where
// decode_by_keys holds): each of a CTA's warps takes its own 32-key tiles of the chunk with all of
// the group's rows (warp_tile) in passes of up to kDecodePassRows rows, and the warps meet once, in
// shared memory, at the end of a pass (merge_warps). One pass for every cache: the rows come from a
// KvSource<E> (attention/kv_compact.cuh), and overloads of warp_tile and prefetch_tile read it —
// 16- and 32-bit rows (attention/decode_warp.cuh) or a compact format's codes and scales
// (attention/decode_warp_codes.cuh).
#pragma once

#include "attention/decode_merge.cuh"
#include "attention/decode_warp.cuh"
#include "attention/decode_warp_codes.cuh"

namespace ninfer::cuda_plugin::attention {

// The CTA's shared memory for R rows per pass: the pass's q rows, then one slot per warp for its
// rows' results (running max, sum of weights, unnormalised output row) to be merged.
template <int HD, int R>
struct DecodeSmem {
  float* q;     // [R][HD]
  float* warps; // [kDecodeWarps][R][partial_floats(HD)]
  __device__ explicit DecodeSmem(unsigned char* base)
      : q(reinterpret_cast<float*>(base)), warps(q + R * HD) {}
  __device__ float* slot(int warp, int i) const { return warps + (warp * R + i) * partial_floats(HD); }
};

// The CTA's warps' results for rows [r0, r0 + R) merged into one (max, sum, row) each: written as
// the token's output rows when the keys are not cut, else as this chunk's partials. Threads take
// (row, dim) elements; each recomputes its row's max and weights from the warps' slots (8 values).
template <int HD, int R>
__device__ void merge_warps(const ninfer_attention_args& a, const DecodeSmem<HD, R>& sm, int64_t t, int64_t tt, int g,
                            int r0, int chunk, int chunks, LaunchScratch ws) {
  const int group = a.heads / a.cache.kv_heads, hd = a.cache.head_dim;
  for (int e = threadIdx.x; e < R * hd; e += kDecodeThreads) {
    const int i = e / hd, d = e % hd, r = r0 + i;
    if (r >= group) break; // rows only grow with e
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w)
      if (sm.slot(w, i)[1] > 0.f) m = fmaxf(m, sm.slot(w, i)[0]);
    float total = 0.f, out = 0.f;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) {
      const float* sl = sm.slot(w, i);
      const float wt = sl[1] > 0.f ? expf(sl[0] - m) : 0.f;
      total = fmaf(wt, sl[1], total);
      out = fmaf(wt, sl[2 + d], out);
    }
    const int h = g * group + r;
    if (chunks == 1) {
      a.out[t * a.out_token_stride + static_cast<int64_t>(h) * hd + d] =
          total > 0.f ? out / total : __int_as_float(0x7fc00000);
      continue;
    }
    float* p = partial_at(ws.partials, tt, g, chunk, r, a.cache.kv_heads, chunks, group, hd);
    if (d == 0) p[0] = m, p[1] = total;
    p[2 + d] = out;
  }
}

// Keys [k0, k1) of kv head g for rows [r0, r0 + R): the pass's q rows into shared memory (int4r:
// rotated, since its keys are stored rotated), the warps over their 32-key tiles (warp w takes
// tiles w, w + kDecodeWarps, ...; the next one's rows requested into L2 before this one is read),
// their results into their slots, then merged (merge_warps).
template <class E, int HD, int R>
__device__ void decode_pass(const ninfer_attention_args& a, const DecodeSmem<HD, R>& sm, const KvSource<E>& kv,
                            int64_t t, int64_t tt, int g, int r0, int k0, int k1, int chunk, int chunks, LaunchScratch ws) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int group = a.heads / a.cache.kv_heads, hd = a.cache.head_dim;
  __syncthreads(); // the previous pass is done with q and the slots
  for (int i = warp; i < R; i += kDecodeWarps) {
    const int r = r0 + i;
    const float* src = r < group ? a.q + t * a.q_token_stride + static_cast<int64_t>(g * group + r) * a.q_head_stride
                                 : nullptr;
    load_q_row<HD>(sm.q + i * HD, src, hd, a.scale, lane, 32);
    if constexpr (kv_rotated_keys<E>) // H q, by the warp that wrote the row (kv_append.h)
      if (src) hadamard_rotate_row(sm.q + i * HD, hd, lane);
  }
  __syncthreads();
  RowState<HD, R> st;
  st.reset();
  constexpr int kStride = kKeysPerTile * kDecodeWarps;
  int key0 = k0 + warp * kKeysPerTile;
  if (key0 < k1) prefetch_tile(kv, key0, min(kKeysPerTile, k1 - key0), lane);
  for (; key0 < k1; key0 += kStride) {
    if (key0 + kStride < k1) prefetch_tile(kv, key0 + kStride, min(kKeysPerTile, k1 - key0 - kStride), lane);
    warp_tile(st, sm.q, kv, key0, min(kKeysPerTile, k1 - key0), lane);
  }
#pragma unroll
  for (int i = 0; i < R; ++i) {
    float* sl = sm.slot(warp, i);
    const float total = st.total(i);
    if (lane == 0) sl[0] = st.m[i], sl[1] = total; // total 0: the warp had no keys
#pragma unroll
    for (int k = 0; k < RowState<HD, R>::kDimsPerLane; ++k)
      sl[2 + lane * RowState<HD, R>::kDimsPerLane + k] = st.acc[i][k];
  }
  __syncthreads();
  merge_warps(a, sm, t, tt, g, r0, chunk, chunks, ws);
}

// R: rows per pass (a group of more than R rows takes several passes over the same keys, the
// later ones from L2).
template <class E, int HD, int R>
__device__ void decode_split_keys(const ninfer_attention_args& a, int64_t tb, int64_t te, LaunchScratch ws) {
  extern __shared__ __align__(16) unsigned char smem[];
  const DecodeSmem<HD, R> sm(smem);
  const ninfer_kv_cache& c = a.cache;
  const int kvh = c.kv_heads, group = a.heads / kvh;
  const CtaWork w = cta_work(a, tb, te);
  const int64_t tt = w.tt, t = w.t;
  const int chunks = w.chunks, chunk = w.chunk, k0 = w.k0, k1 = w.k1;

  for (int g = w.g0; g < kvh; g += w.gstep) {
    KvSource<E> kv = kv_source<E>(c, w.ok ? w.slot : 0, g);
    if constexpr (!kv_compact<E>) // a lane's value dims all in the row or none (compact head dims: multiples of 16)
      kv.vec = kv.vec && c.head_dim % RowState<HD, R>::kDimsPerLane == 0;
    for (int r0 = 0; r0 < group; r0 += R) decode_pass<E, HD, R>(a, sm, kv, t, tt, g, r0, k0, k1, chunk, chunks, ws);
    if (chunks > 1) merge_if_last_chunk<HD>(a, ws, tb, tt, g, chunks);
  }
}

// Rows per pass (decode_pass_rows): 4 for groups up to 4, 6 for 5-6 (Qwen3.5-27B), else 8 (16 in
// two passes).
template <class E, int HD>
__device__ void decode_split_keys_rows(const ninfer_attention_args& a, int64_t tb, int64_t te, LaunchScratch ws) {
  switch (decode_pass_rows(a.heads / a.cache.kv_heads)) {
  case kDecodeSmallPass: decode_split_keys<E, HD, kDecodeSmallPass>(a, tb, te, ws); break;
  case kDecodeMidPass: decode_split_keys<E, HD, kDecodeMidPass>(a, tb, te, ws); break;
  default: decode_split_keys<E, HD, kDecodePassRows>(a, tb, te, ws);
  }
}

} // namespace ninfer::cuda_plugin::attention
