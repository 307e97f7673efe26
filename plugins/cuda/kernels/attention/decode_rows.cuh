// The split-KV decode with warps owning rows (attention/decode.cu; every head-dim class but
// decode_by_keys'): a CTA's rows are the query heads of its kv head, one or two per warp, and the
// whole CTA walks the chunk one 32-key tile at a time, each tile staged once in shared memory for
// the whole GQA group. A 16-bit cache's next tile is fetched into registers before the CTA
// computes on the current one, so that tile's memory latency hides behind the computation
// (KvTileInFlight). The float32 cache keeps the single-buffered loop: its tile in registers would
// cost twice as many (32 at hd128 with 256 threads) inside the 128-register bound that keeps two
// CTAs per SM. A compact cache (attention/kv_compact.cuh) takes the single-buffered loop too, its
// codes widened as each tile is staged, in the same head-dim classes.
#pragma once

#include "attention/decode_merge.cuh"
#include "attention/kv_compact.cuh"

namespace ninfer::cuda_plugin::attention {

constexpr int kRows = kDecodeMaxGroup;

// Keys [k0, k1) of one kv head through the rows' online softmax (st), tile by tile. The caller's
// q rows must be in the q tile, visible after the first barrier here.
template <class E, int HD, int R>
__device__ void decode_keys(RowState<HD, R>& st, const Tiles<HD, kRows>& tiles, const KvSource<E>& kv, int k0, int k1,
                            const int (&row)[R], const int (&last)[R], int group) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if constexpr (!kv_compact<E> && sizeof(E) == 2) {
    if (kv.vec) { // pipelined: tile n + 1 is in flight while tile n is computed
      KvTileInFlight<E, HD, kDecodeThreads> next;
      if (k0 < k1) next.fetch(kv, k0, min(k1 - k0, kKeysPerTile));
      for (int key0 = k0; key0 < k1; key0 += kKeysPerTile) {
        const int nkeys = min(k1 - key0, kKeysPerTile);
        __syncthreads(); // every warp is done with the previous tile
        next.store(tiles);
        __syncthreads();
        if (key0 + kKeysPerTile < k1) next.fetch(kv, key0 + kKeysPerTile, min(k1 - key0 - kKeysPerTile, kKeysPerTile));
        if (warp < group) attend_tile(st, tiles, row, last, key0, nkeys, lane);
      }
      return;
    }
  }
  for (int key0 = k0; key0 < k1; key0 += kKeysPerTile) {
    const int nkeys = min(k1 - key0, kKeysPerTile);
    __syncthreads();
    load_tile<E, HD, kRows, kDecodeThreads>(tiles, kv, key0, nkeys);
    __syncthreads();
    if (warp < group) attend_tile(st, tiles, row, last, key0, nkeys, lane);
  }
}

// R: rows per warp, the fewest that hold the GQA group (group <= kDecodeWarps * R).
template <class E, int HD, int R>
__device__ void decode_split(const ninfer_attention_args& a, int64_t tb, int64_t te, LaunchScratch ws) {
  extern __shared__ __align__(16) unsigned char smem[];
  const Tiles<HD, kRows> tiles(smem);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const ninfer_kv_cache& c = a.cache;
  const int kvh = c.kv_heads, group = a.heads / kvh, hd = c.head_dim;
  const CtaWork w = cta_work(a, tb, te);
  const int64_t tt = w.tt, t = w.t;
  const int chunks = w.chunks, chunk = w.chunk, k0 = w.k0, k1 = w.k1, slot = w.slot, pos = w.pos;
  const bool ok = w.ok;

  // Rows are the group's query heads, spread over the warps: row warp + kDecodeWarps * i.
  int row[R], last[R];
  bool active[R];
#pragma unroll
  for (int i = 0; i < R; ++i) {
    row[i] = warp + kDecodeWarps * i;
    active[i] = row[i] < group;
    last[i] = active[i] ? pos : -1;
  }

  for (int g = w.g0; g < kvh; g += w.gstep) {
    __syncthreads(); // every warp is done with the previous kv head's tiles
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const float* src =
          active[i] ? a.q + t * a.q_token_stride + static_cast<int64_t>(g * group + row[i]) * a.q_head_stride : nullptr;
      load_q_row<HD>(tiles.q + row[i] * HD, src, hd, a.scale, lane, 32);
    }
    if constexpr (kv_rotated_keys<E>) { // int4r: H q, once per row (kv_append.h)
#pragma unroll
      for (int i = 0; i < R; ++i)
        if (active[i]) hadamard_rotate_row(tiles.q + row[i] * HD, hd, lane);
    }
    RowState<HD, R> st;
    st.reset();
    decode_keys<E, HD, R>(st, tiles, kv_source<E>(c, ok ? slot : 0, g), k0, k1, row, last, group);
#pragma unroll
    for (int i = 0; i < R; ++i) {
      if (!active[i]) continue;
      const int h = g * group + row[i];
      if (chunks == 1) {
        store_row(st, i, a.out + t * a.out_token_stride + static_cast<int64_t>(h) * hd, hd, lane);
        continue;
      }
      float* p = partial_at(ws.partials, tt, g, chunk, row[i], kvh, chunks, group, hd);
      const float total = st.total(i);
      if (lane == 0) {
        p[0] = st.m[i];
        p[1] = total;
      }
#pragma unroll
      for (int k = 0; k < RowState<HD, R>::kDimsPerLane; ++k) {
        const int d = lane + 32 * k;
        if (d < hd) p[2 + d] = st.acc[i][k];
      }
    }
    if (chunks > 1) merge_if_last_chunk<HD>(a, ws, tb, tt, g, chunks);
  }
}

// One kernel serves every group size: a warp takes as few rows as the group needs (one row per
// warp for groups up to 8, Qwen3-8B's 4 among them; two up to 16).
template <class E, int HD>
__device__ void decode_split_rows(const ninfer_attention_args& a, int64_t tb, int64_t te, LaunchScratch ws) {
  const int group = a.heads / a.cache.kv_heads;
  static_assert(kDecodeRowsPerWarp == 2, "one path per row count");
  if (group <= kDecodeWarps) decode_split<E, HD, 1>(a, tb, te, ws);
  else decode_split<E, HD, 2>(a, tb, te, ws);
}

} // namespace ninfer::cuda_plugin::attention
