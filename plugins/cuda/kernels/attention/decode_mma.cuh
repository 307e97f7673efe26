// The split-KV decode on tensor cores (attention/decode.cu; the hd128 class with a float16 or
// bfloat16 cache whose rows are 16-byte vectors): a CTA's GQA group is the 16 rows of one
// m16n8k16 A fragment (rows past the group are zero and masked), and each of its 8 warps walks
// its own 16-key tiles of the chunk (tiles warp, warp + 8, ...) with the prefill's per-warp step
// (attend_tile_mma). A warp copies its tile into its own shared memory with cp.async, so it needs
// no barrier with the other warps and holds no staging registers. The warps' states meet once,
// in shared memory. 16-key tiles keep the CTA at 74 KB of shared memory: two CTAs per SM on the
// H200, and one on the 100 KB cards (sm_89, sm_120a). A Qwen3-8B layer at 4,096 keys runs 256
// CTAs of 130-key chunks (kMinChunkKeys): about one tile per warp, copied while the q rows load.
// (32-key tiles, one per warp, measured slower; 128 CTAs of 256-key chunks, two tiles per warp
// merged in clusters, measured the same at 4,096 keys and slower below 2,048.)
//
// Why: the row-owning kernel (attention/decode_rows.cuh) spent ~1,000 instructions per 32-key
// tile and row, one warp per scheduler, and ncu put its time in instruction latency: at 4,096
// keys it took 26.5 us per Qwen3-8B layer where the layer's 16.8 MB of cache streams in 4 us, and
// neither twice the CTAs nor half the tiles per CTA moved it (docs/performance.md). On tensor
// cores 16 keys x 16 rows are ~100 instructions.
//
// Precision is the tensor-core prefill's: q is rounded to the cache's format (K and V are used
// as stored), P is rounded before P V, and the sums add the rounded weights; products accumulate
// and the softmax runs in float32 (docs/cuda-attention.md, "Precision").
#pragma once

#include "attention/head_norm_rope_append_attention.cuh"
#include "attention/decode_merge.cuh"
#include "attention/decode_runs.cuh"
#include "attention/mma_tile.cuh"
#include "common/grid_dependency.cuh"

namespace ninfer::cuda_plugin::attention {

constexpr int kDecodeMmaKeys = 16; // keys per warp tile

// The tensor cores' input format for a 16-bit cache: the cache's own, so K and V are copied as
// they are.
template <class E>
struct DecodeMmaInputs {
  using type = mma::F16Inputs;
};
template <>
struct DecodeMmaInputs<__nv_bfloat16> {
  using type = mma::Bf16Inputs;
};

// Starts copying keys [key0, key0 + nkeys) of K and V into the warp's tiles (pitch P elements)
// with cp.async, zero-filling rows past nkeys and dims past head_dim: the tile rows j for which
// rows(j) holds, as one commit group. The whole warp calls it; warp_tile_wait() ends every group.
// key0 is a multiple of kDecodeMmaKeys, so the tile lies in one KV block (tile.cuh, KvRows).
template <class E, int HD, class Rows>
__device__ void warp_tile_copy(E* ks, E* vs, const KvRows<E>& slot_rows, int key0, int nkeys, int lane, Rows rows) {
  constexpr int P = mma_pitch(HD), kVec = 8, kPerRow = HD / kVec;
  constexpr int kIters = kDecodeMmaKeys * kPerRow / 32;
  const KvRows<E> kv = nkeys > 0 ? slot_rows.tile(key0) : slot_rows;
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int i = lane + 32 * it, j = i / kPerRow;
    if (!rows(j)) continue;
    copy_vec_async(ks, vs, kv, nkeys, j, (i % kPerRow) * kVec, P);
  }
  asm volatile("cp.async.commit_group;\n" ::);
}

// Waits for the warp's copy; afterwards every lane may read every row of the tiles.
__device__ __forceinline__ void warp_tile_wait() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  __syncwarp();
}

// Shared memory: the group's q rows (16 x P elements), then per warp a K and a V tile; after the
// key walk the tiles' space holds the warps' states for the merge (MmaMergeSlot).
NINFER_HD_FN constexpr size_t decode_mma_smem_bytes(int hd) {
  return 2 * static_cast<size_t>(16 + 2 * kDecodeWarps * kDecodeMmaKeys) * mma_pitch(hd);
}

// One warp's state of one row for the merge: running max (log2 domain), total weight, output.
template <int HD>
struct MmaMergeSlot {
  float m, l, pad[2], o[HD];
};

// The fold's rows for kv head kh (attention/head_norm_rope_append_attention.cuh): warp tasks are
// the group's q rows (normalised, rotated, scaled, rounded into the A tile), then, when the CTA
// holds the token's own key, its k row (normalised and rotated) and its v row (as projected), each
// rounded to the cache dtype, written to the cache and staged for the tile. Rows past the group
// were zeroed before the launch wait.
template <class E, int HD>
__device__ void fold_rows(const ninfer_attention_args& a, const ninfer_head_norm_rope_append_args& prep,
                          const FoldSmem<E, HD>& fs, E* qs, const KvRows<E>& kv, int64_t t, int pos, int kh,
                          bool own, float qscale, int warp, int lane) {
  using In = typename DecodeMmaInputs<E>::type;
  constexpr int P = mma_pitch(HD), kPer = HD / 32;
  const ninfer_head_norm_rope_args& r = prep.rope;
  const int group = a.heads / a.cache.kv_heads, hd = a.cache.head_dim;
  const int64_t own_row = own ? kv.row_offset(pos) : 0; // through the table only for a key it holds
  E* const k_row = const_cast<E*>(kv.k) + own_row;
  E* const v_row = const_cast<E*>(kv.v) + own_row;
  const int tasks = group + (own ? 2 : 0);
  for (int task = warp; task < tasks; task += kDecodeWarps) {
    float o[kPer];
    if (task < group) {
      const float* x = r.q + t * r.q_token_stride + static_cast<int64_t>(kh * group + task) * r.q_head_stride;
      fold_norm_rope_row<HD>(x, fs.wq, r, fs.cs, fs.sn, fs.rows + warp * HD, lane, o);
#pragma unroll
      for (int u = 0; u < kPer; ++u) qs[task * P + lane + 32 * u] = In::from(o[u] * qscale);
      continue;
    }
    const bool is_k = task == group;
    if (is_k) {
      const float* x = r.k + t * r.k_token_stride + static_cast<int64_t>(kh) * r.k_head_stride;
      fold_norm_rope_row<HD>(x, fs.wk, r, fs.cs, fs.sn, fs.rows + warp * HD, lane, o);
    } else {
      const float* x = prep.append.v + t * prep.append.v_token_stride + static_cast<int64_t>(kh) * hd;
#pragma unroll
      for (int u = 0; u < kPer; ++u) o[u] = lane + 32 * u < hd ? x[lane + 32 * u] : 0.f;
    }
    E* const row = is_k ? k_row : v_row;
    E* const staged = is_k ? fs.k : fs.v;
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int d = lane + 32 * u;
      E e;
      to_cache(o[u], e);
      staged[d] = e; // zero past head_dim, as the tile copy fills those dims
      if (d < hd) row[d] = e;
    }
  }
}

// kFold: head_norm_rope_append_attention (attention/head_norm_rope_append_attention.cuh), `prep`
// its first half; otherwise the attention op, `prep` unused.
template <class E, int HD, bool kFold>
__device__ void decode_split_mma(const ninfer_attention_args& a, const ninfer_head_norm_rope_append_args& prep,
                                 int64_t tb, int64_t te, LaunchScratch ws) {
  using In = typename DecodeMmaInputs<E>::type;
  constexpr int P = mma_pitch(HD);
  static_assert(sizeof(MmaMergeSlot<HD>) * kDecodeWarps * 16 <= sizeof(E) * 2 * kDecodeWarps * kDecodeMmaKeys * P,
                "the merge slots must fit in the K/V tiles' space");
  extern __shared__ __align__(16) unsigned char smem[];
  E* const qs = reinterpret_cast<E*>(smem);
  E* const tiles = qs + 16 * P;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  E* const ks = tiles + warp * 2 * kDecodeMmaKeys * P;
  E* const vs = ks + kDecodeMmaKeys * P;
  auto* const slots = reinterpret_cast<MmaMergeSlot<HD>*>(tiles); // [warp][row], after the walk
  float* const cluster_rows = reinterpret_cast<float*>(qs);         // [group][HD + 2], after the walk
  static_assert(sizeof(float) * kDecodeClusterMaxGroup * cluster_row_floats(HD) <= sizeof(E) * 16 * P,
                "a cluster launch's rows must fit in the q tile's space");
  const LaneAddrs ad = lane_addrs<HD>(qs, ks, vs, lane);
  const FoldSmem<E, HD> fs(smem + decode_mma_smem_bytes(HD)); // kFold only
  const ninfer_kv_cache& cache = a.cache;
  const int kvh = cache.kv_heads, group = a.heads / kvh, hd = cache.head_dim;
  // Before the launch wait (common/grid_dependency.cuh): which keys this CTA takes (the step's
  // batch arrays, uploaded before the step) and its first kv head's first tile as far as it holds
  // keys before the sequence's first position in this call, which earlier steps wrote. Both overlap
  // the previous kernel; the rest of the tile (this call's own keys) is copied after the wait.
  const CtaWork w = cta_work(a, tb, te);
  // Runs (attention/decode_runs.cuh): a sequence's consecutive tokens share the A fragment's rows.
  // The fold writes one token's own key, so it keeps one token per CTA.
  const DecodeRuns runs = decode_runs(a, tb, te, kFold ? 1 : 16 / group, ws);
  bool any;
  RunItem it = first_item(a, tb, te, runs, w, any);
  const int settled = settled_keys(a, tb, it);
  constexpr int kStride = kDecodeWarps * kDecodeMmaKeys; // keys between a warp's tiles
  // Rows [0, early) of a warp's first tile hold settled keys; rows past n are zero-filled.
  const auto early_rows = [settled](int key0, int n) { return min(max(settled - key0, 0), n); };
  // kFold: the token's own key is written by this launch; `own` is the key in the CTA's tiles.
  const int own = kFold && it.ok && it.k0 <= it.pos && it.pos < it.k1 ? it.pos : -1;
  if (kFold && any) { // a CTA without work leaves after the wait
    fold_prepare<E, HD>(prep.rope, it.ok ? it.pos : 0, fs);
    // The A tile's rows past the group stay zero for every kv head (fold_rows writes the others).
    for (int i = threadIdx.x; i < (16 - group) * HD; i += kDecodeThreads)
      qs[(group + i / HD) * P + i % HD] = In::from(0.f);
  }
  if (any && it.k0 + warp * kDecodeMmaKeys < it.k1) {
    const int key0 = it.k0 + warp * kDecodeMmaKeys, n = min(it.k1 - key0, kDecodeMmaKeys), e = early_rows(key0, n);
    warp_tile_copy<E, HD>(ks, vs, kv_rows<E>(cache, it.ok ? it.slot : 0, it.kh), key0, n, lane,
                          [=](int j) { return j < e || j >= n; });
  }
  grid_dependency_prologue();
  const float qscale = a.scale * kLog2e;

  for (bool first = true; any; first = false, any = next_item(a, tb, te, runs, it)) {
    const int kh = it.kh, rows = it.n * group; // rows of the A fragment in use
    // Row g + 8 i of the A fragment sees keys up to last[i] (-1: none, a row past the run's).
    // Keys past the chunk are zero rows, masked by the chunk's end.
    int last[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) last[i] = it.last(g + 8 * i, group, cache);
    const KvRows<E> kv = kv_rows<E>(cache, it.ok ? it.slot : 0, kh);
    int key0 = it.k0 + warp * kDecodeMmaKeys;
    __syncthreads(); // every warp is done with the previous item's q rows and merge slots
    // The first tile's copy goes out before the q rows are read: both latencies overlap. The
    // first item's settled rows and zero rows are in flight already; a later item's tile is
    // copied whole (its zero rows too: the space held the previous item's merge slots).
    if (key0 < it.k1) {
      const int n = min(it.k1 - key0, kDecodeMmaKeys), e = first ? early_rows(key0, n) : 0;
      warp_tile_copy<E, HD>(ks, vs, kv, key0, n, lane,
                            [=](int j) { return (!first || (j >= e && j < n)) && key0 + j != own; });
    }
    if constexpr (kFold)
      fold_rows<E, HD>(a, prep, fs, qs, kv, tb + it.tt, it.pos, kh, own >= 0, qscale, warp, lane);
    else
      for (int i = threadIdx.x; i < 16 * HD; i += kDecodeThreads) {
        const int r = i / HD, d = i % HD;
        const float* src = a.q + (tb + it.tt + r / group) * a.q_token_stride +
                           static_cast<int64_t>(kh * group + r % group) * a.q_head_stride;
        qs[r * P + d] = In::from(r < rows && d < hd ? __ldg(src + d) * qscale : 0.f);
      }
    __syncthreads();
    MmaRows<HD> st;
    st.reset();
    for (; key0 < it.k1; key0 += kStride) {
      warp_tile_wait();
      if (kFold && own >= key0 && own < key0 + kDecodeMmaKeys) fold_place_key<E, HD>(ks, vs, fs, own - key0, lane);
      // Masked when a key of the tile lies past some row's last (for one token: past the chunk).
      attend_tile_mma<In, HD, kDecodeMmaKeys>(st, ad, key0, last, key0 + kDecodeMmaKeys - 1 > it.min_last, lane);
      __syncwarp(); // every lane is done with the tile before the next copy overwrites it
      const int next = key0 + kStride;
      if (next < it.k1)
        warp_tile_copy<E, HD>(ks, vs, kv, next, min(it.k1 - next, kDecodeMmaKeys), lane,
                              [=](int j) { return next + j != own; });
    }
    __syncthreads(); // the tiles' space becomes the merge slots

    // Each warp's rows: the row's 4 lanes hold its max (equal) and shares of its sum.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int r = g + 8 * i;
      const float l = st.total(i);
      if (r >= rows) continue;
      MmaMergeSlot<HD>& s = slots[warp * 16 + r];
      if (c == 0) s.m = st.m[i], s.l = l;
#pragma unroll
      for (int n = 0; n < HD / 8; ++n)
        *reinterpret_cast<float2*>(s.o + n * 8 + 2 * c) = make_float2(st.o[n][2 * i], st.o[n][2 * i + 1]);
    }
    __syncthreads();

    // The merge: element (r, d) of the run's rows per thread. A warp that saw no key has
    // m = -inf and weight 0; a row no warp saw (a token outside the cache) gets total 0.
    const int chunks = it.chunks;
    for (int i = threadIdx.x; i < rows * HD; i += kDecodeThreads) {
      const int r = i / HD, d = i % HD;
      float mx = -INFINITY;
#pragma unroll
      for (int v = 0; v < kDecodeWarps; ++v) mx = fmaxf(mx, slots[v * 16 + r].m);
      float total = 0.f, o = 0.f;
      if (mx != -INFINITY) {
#pragma unroll
        for (int v = 0; v < kDecodeWarps; ++v) {
          const MmaMergeSlot<HD>& s = slots[v * 16 + r];
          const float wv = exp2f(s.m - mx);
          total += wv * s.l;
          o += wv * s.o[d];
        }
      }
      if (it.cluster) { // this chunk's rows, for cluster_merge (the q tile's space is free now)
        float* row = cluster_rows + r * cluster_row_floats(HD);
        if (d == 0) row[0] = mx, row[1] = total;
        row[2 + d] = o;
        continue;
      }
      if (d >= hd) continue;
      const int64_t tt = it.tt + r / group; // the row's token and query head
      const int h = kh * group + r % group;
      if (chunks == 1) {
        a.out[(tb + tt) * a.out_token_stride + static_cast<int64_t>(h) * hd + d] =
            total > 0.f ? o / total : __int_as_float(0x7fc00000);
        continue;
      }
      // The chunk's partial, in the natural-log domain merge_row works in.
      float* p = partial_at(ws.partials, tt, kh, it.chunk, r % group, kvh, chunks, group, hd);
      if (d == 0) {
        p[0] = mx * (1.f / kLog2e);
        p[1] = total;
      }
      p[2 + d] = o;
    }
    if (it.cluster) {
      cluster_merge<HD>(a, cluster_rows, tb + it.tt, kh, it.cluster, it.chunk);
    } else if (chunks > 1) {
      // The merge's stage: the q tile and the K/V tiles. A CTA with chunks > 1 has one item
      // (cta_work: splits >= kv_heads; runs: items fill at most the grid), so nothing reads them
      // again, not even the q tile's zero rows.
      merge_if_last_chunk<HD>(a, ws, tb, it.tt, kh, chunks, reinterpret_cast<float*>(smem), decode_mma_smem_bytes(HD),
                              it.n);
    }
  }
}

} // namespace ninfer::cuda_plugin::attention
