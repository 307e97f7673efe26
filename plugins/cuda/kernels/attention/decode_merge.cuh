// What both split-KV decode designs share (attention/decode.cu): which keys a CTA takes, where
// a chunk's partial result goes, and how the chunks of one (token, kv head) meet — merge tickets
// and the merge of the partials.
#pragma once

#include "attention/decode_cluster.cuh"
#include "attention/tile.cuh"

namespace ninfer::cuda_plugin::attention {

// Partial result of (token tt of the launch, kv head g, chunk, row r of the group).
template <class F> // float or const float
__device__ inline F* partial_at(F* ws, int64_t tt, int g, int chunk, int r, int kv_heads, int chunks,
                                    int group, int head_dim) {
  return ws + (((tt * kv_heads + g) * chunks + chunk) * group + r) * partial_floats(head_dim);
}

// Merges the chunks' partials of one (token, head) row into its output row: one warp. It runs in
// the launch's tail (the last chunk's CTA, after all others), so its L2 round trips are counted
// in the step: lanes take chunks, and the first pass reads each chunk's max and weight together
// and keeps the first 32 for the second (one round trip for up to 32 chunks, not two); then
// every lane adds its output dims over the chunks, the chunk's weight broadcast from the lane
// that computed it, loads unrolled so 32 floats per lane are in flight at once (8 chunks' rows at
// hd128, so the rows of a 16-chunk merge take two round trips, not four; 4 at hd256, where more
// spilled). An empty chunk (past the token's position) has weight 0 and a zero row, so it needs
// no branch.
template <int HD>
__device__ void merge_row(const ninfer_attention_args& a, const float* ws, int64_t tb, int64_t tt, int h, int chunks,
                          int lane) {
  const ninfer_kv_cache& c = a.cache;
  const int group = a.heads / c.kv_heads, g = h / group, r = h % group, hd = c.head_dim;
  const int64_t chunk_stride = static_cast<int64_t>(group) * partial_floats(hd);
  const float* p0 = partial_at(ws, tt, g, 0, r, c.kv_heads, chunks, group, hd);
  // Partials were written by other CTAs: read them through L2 (__ldcg), never a stale L1 line.
  float m = -INFINITY, first_m = -INFINITY, first_l = 0.f; // first_*: chunk `lane`'s
  for (int ch = lane; ch < chunks; ch += 32) {
    const float mc = __ldcg(p0 + ch * chunk_stride), l = __ldcg(p0 + ch * chunk_stride + 1);
    if (ch == lane) first_m = mc, first_l = l;
    if (l > 0.f) m = fmaxf(m, mc);
  }
  m = warp_max(m);
  constexpr int DPL = HD / 32, kInFlight = 32 / DPL; // chunk rows per batch of loads: 32 floats per lane
  float total = 0.f, acc[DPL];
#pragma unroll
  for (int k = 0; k < DPL; ++k) acc[k] = 0.f;
  for (int base = 0; base < chunks; base += 32) {
    const float* mine = p0 + (base + lane) * chunk_stride;
    const bool in = base + lane < chunks;
    const float l = base == 0 ? first_l : in ? __ldcg(mine + 1) : 0.f;
    const float mc = base == 0 ? first_m : in ? __ldcg(mine) : -INFINITY;
    const float w = l > 0.f ? expf(mc - m) : 0.f;
    total += w * l;
    const int n = min(32, chunks - base);
#pragma unroll kInFlight
    for (int j = 0; j < n; ++j) {
      const float wj = __shfl_sync(kFullMask, w, j);
      const float* p = p0 + (base + j) * chunk_stride + 2;
#pragma unroll
      for (int k = 0; k < DPL; ++k) {
        const int d = lane + 32 * k;
        if (d < hd) acc[k] = fmaf(wj, __ldcg(p + d), acc[k]);
      }
    }
  }
  total = warp_sum(total);
  float* dst = a.out + (tb + tt) * a.out_token_stride + static_cast<int64_t>(h) * hd;
#pragma unroll
  for (int k = 0; k < DPL; ++k) {
    const int d = lane + 32 * k;
    if (d < hd) dst[d] = total > 0.f ? acc[k] / total : __int_as_float(0x7fc00000);
  }
}

// The same merge for all `group` rows of kv head g at once, by the whole CTA, from a copy of the
// head's partials in shared memory (`stage`, `stage_bytes` of it free): one cp.async round trip
// for every chunk's rows, where merge_row's warps make one for the chunks' maxima and then one per
// 8 chunks' rows. A probe of the Qwen3-8B decode on the H200 put the cross-CTA merge at 6 us per
// layer at 4,096 keys (32 chunks per kv head; docs/performance.md), most
// of it those round trips in the launch's tail. Same arithmetic in the same order as merge_row,
// so both give the same bits. False (nothing done) when the partials and their weights do not
// fit in `stage_bytes` or are not 16-byte aligned; the caller then merges with merge_row.
template <int HD>
__device__ bool merge_staged(const ninfer_attention_args& a, const float* ws, int64_t tb, int64_t tt, int g,
                             int chunks, float* stage, size_t stage_bytes) {
  const ninfer_kv_cache& c = a.cache;
  const int group = a.heads / c.kv_heads, hd = c.head_dim, pf = static_cast<int>(partial_floats(hd));
  const int n = chunks * group * pf; // floats of the head's partials: [chunk][row][pf]
  const float* p0 = partial_at(ws, tt, g, 0, 0, c.kv_heads, chunks, group, hd);
  const size_t need = sizeof(float) * (static_cast<size_t>(n) + static_cast<size_t>(group) * (chunks + 1));
  if (need > stage_bytes || n % 4 != 0 || reinterpret_cast<uintptr_t>(p0) % 16 != 0) return false;
  for (int i = 4 * static_cast<int>(threadIdx.x); i < n; i += 4 * static_cast<int>(blockDim.x))
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(mma::smem_addr(stage + i)), "l"(p0 + i));
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();
  float* const weights = stage + n;               // [row][chunk]: e^(m_chunk - m_row), 0 for an empty chunk
  float* const totals = weights + group * chunks; // [row]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int r = warp; r < group; r += blockDim.x >> 5) {
    float m = -INFINITY;
    for (int ch = lane; ch < chunks; ch += 32) {
      const float* p = stage + (ch * group + r) * pf;
      if (p[1] > 0.f) m = fmaxf(m, p[0]);
    }
    m = warp_max(m);
    float total = 0.f;
    for (int ch = lane; ch < chunks; ch += 32) {
      const float* p = stage + (ch * group + r) * pf;
      const float w = p[1] > 0.f ? expf(p[0] - m) : 0.f;
      weights[r * chunks + ch] = w;
      total += w * p[1];
    }
    total = warp_sum(total);
    if (lane == 0) totals[r] = total;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < group * hd; i += blockDim.x) {
    const int r = i / hd, d = i % hd;
    float acc = 0.f;
#pragma unroll 8 // the loads of 8 chunks in flight; the sum's order stays merge_row's
    for (int ch = 0; ch < chunks; ++ch) acc = fmaf(weights[r * chunks + ch], stage[(ch * group + r) * pf + 2 + d], acc);
    const float total = totals[r];
    a.out[(tb + tt) * a.out_token_stride + static_cast<int64_t>(g * group + r) * hd + d] =
        total > 0.f ? acc / total : __int_as_float(0x7fc00000);
  }
  return true;
}


// The longest span among the launch's tokens (last position + 1, for the tokens in the cache).
// The lanes of a warp read 32 tokens' batch entries at once, so a launch's tokens cost one round
// trip per 32 (a token-by-token loop made a 16-token call wait on 16 chains of dependent loads).
// The whole warp calls it.
__device__ inline int launch_longest(const ninfer_attention_args& a, int64_t tb, int64_t te) {
  int longest = 0;
  for (int64_t t = tb + (threadIdx.x & 31); t - (threadIdx.x & 31) < te; t += 32)
    if (t < te) {
      const int slot = a.batch.seq_slot[a.batch.token_seq[t]], pos = a.batch.token_pos[t];
      if (in_cache(a.cache, slot, pos)) longest = max(longest, pos + 1);
    }
  return static_cast<int>(__reduce_max_sync(kFullMask, static_cast<unsigned>(longest)));
}

// Key chunks per kv head for this launch: the planned count, cut down to what the launch's
// longest span fills with kMinChunkKeys keys per chunk (the planner's own rule, decode_serves,
// applied to the keys the tokens have now rather than to the planned context). A graph replays
// one plan at every position, so early in a sequence the keys are few: one chunk then means no
// partials, no grid barrier and no merge (~3 us of a 10 us launch at a handful of keys). Every
// CTA computes the same value from the batch metadata, so the barrier is taken by all or none.
__device__ inline int run_chunks(const ninfer_attention_args& a, int64_t tb, int64_t te, int planned) {
  if (planned == 1) return 1;
  return max(1, min(planned, launch_longest(a, tb, te) / static_cast<int>(kMinChunkKeys)));
}
// Keys [k0, k1) of chunk `chunk` of `chunks` over a span of `span` keys. Whole key tiles per
// chunk: every chunk starts at a multiple of kKeysPerTile, so each of its tiles lies in one KV
// block (tile.cuh, KvRows). Chunks past the span are empty.
struct KeyRange {
  int k0, k1;
};
__device__ inline KeyRange chunk_keys(int span, int chunks, int chunk) {
  const int len = ((span + chunks - 1) / chunks + kKeysPerTile - 1) / kKeysPerTile * kKeysPerTile;
  const int k0 = min(span, chunk * len);
  return {k0, min(span, k0 + len)};
}

// What one decode CTA does: token t (tt within the launch) and kv heads g0, g0 + gstep, ...
// (below kv_heads), each with key chunk `chunk` of `chunks`, keys [k0, k1) of the token's span.
// Below the kv head count a CTA takes whole kv heads; from there on every kv head's keys are cut
// into chunks, one per CTA. In a cluster launch (attention/decode_cluster.cuh) the cluster is
// one kv head's planned chunks, CTA rank = chunk; when the live span needs fewer chunks, the
// ranks past them have no keys, or, at one chunk, nothing to do at all.
struct CtaWork {
  int64_t tt, t;
  int slot, pos;
  bool ok; // the token's (slot, position) lies in the cache; else it sees no key (NaN rows)
  int chunks, chunk, g0, gstep, k0, k1;
  int cluster; // CTAs whose rows meet in shared memory (cluster_merge); 0: none
};
__device__ inline CtaWork cta_work(const ninfer_attention_args& a, int64_t tb, int64_t te) {
  const ninfer_kv_cache& c = a.cache;
  const int kvh = c.kv_heads, splits = gridDim.y, split = blockIdx.y;
  CtaWork w;
  w.chunks = run_chunks(a, tb, te, chunks_per_head(splits, kvh));
  w.tt = blockIdx.x; // tokens_per_cta = 1: grid.x covers [tb, te)
  w.t = tb + w.tt;
  w.slot = a.batch.seq_slot[a.batch.token_seq[w.t]];
  w.pos = a.batch.token_pos[w.t];
  w.ok = in_cache(c, w.slot, w.pos);
  w.g0 = split, w.gstep = splits, w.chunk = 0, w.cluster = 0;
  if (const int ctas = cluster_ctas(); ctas > 1) { // grid.y = kvh x ctas (the launch checks it)
    w.g0 = w.chunks == 1 && split % ctas ? kvh : split / ctas;
    w.gstep = kvh;
    w.chunk = split % ctas;
    w.cluster = w.chunks > 1 ? ctas : 0;
  } else if (splits >= kvh) {
    w.g0 = split < kvh * w.chunks ? split / w.chunks : kvh; // CTAs past kvh * chunks have no work
    w.gstep = kvh;
    w.chunk = split % w.chunks;
  }
  const KeyRange keys = chunk_keys(w.ok ? w.pos + 1 : 0, w.chunks, w.chunk);
  w.k0 = keys.k0, w.k1 = keys.k1;
  return w;
}

// After a CTA has written its partials of (token tt, kv head g): takes the ticket, and if this
// was the last chunk in, merges that kv head's rows. One ticket per (token of the launch, kv
// head) whose keys are cut into chunks, in the backend's launch tickets (ws.tickets,
// ninfer_launch.tickets): the chunk CTAs take it in turn (atomicInc wraps at chunks - 1), and the
// one that takes it last merges. The wrap returns the ticket to 0 after exactly `chunks` takes,
// so every launch finds them at 0, as the ABI asks, without a reset of its own. They replace a
// cooperative grid barrier: the launch is an ordinary one that starts early behind the previous
// kernel (programmatic dependent launch), and each kv head's merge starts as soon as its own
// chunks are done. Two launches on one stream never overlap; another backend (another stream)
// has tickets of its own. The fence publishes this CTA's partials before its ticket; the one
// after the ticket orders the merge's reads after the others'. Every thread of the CTA calls it. `stage`: shared memory the CTA no longer needs (stage_bytes of it),
// for merge_staged; null: merge_row only. A run (attention/decode_runs.cuh) takes the ticket of
// its first token tt and merges its `tokens` tokens' rows.
template <int HD>
__device__ void merge_if_last_chunk(const ninfer_attention_args& a, LaunchScratch ws, int64_t tb, int64_t tt, int g,
                                    int chunks, float* stage = nullptr, size_t stage_bytes = 0, int tokens = 1) {
  __shared__ bool last_chunk;
  const int kvh = a.cache.kv_heads, group = a.heads / kvh, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0)
    last_chunk = atomicInc(&ws.tickets[tt * kvh + g], static_cast<unsigned>(chunks - 1)) == chunks - 1;
  __syncthreads();
  if (!last_chunk) return;
  __threadfence();
  for (int j = 0; j < tokens; ++j) {
    if (j) __syncthreads(); // the previous token's merge is done with the stage
    if (stage && merge_staged<HD>(a, ws.partials, tb, tt + j, g, chunks, stage, stage_bytes)) continue;
    for (int r = warp; r < group; r += kDecodeWarps)
      merge_row<HD>(a, ws.partials, tb, tt + j, g * group + r, chunks, lane);
  }
}

} // namespace ninfer::cuda_plugin::attention
