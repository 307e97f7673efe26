// Runs: the tokens of one sequence in a decode call, sharing the rows of the tensor-core decode's
// A fragment (attention/decode_mma.cuh). A group of G query heads fills G of its 16 rows, so a
// CTA can take 16 / G consecutive tokens of one sequence and read each K/V tile once for all of
// them. Calls with several tokens of one sequence are a mixed step's prompt chunk (a few dozen
// tokens at the end of a long prompt) and speculative verification (K + 1 tokens per sequence).
// Token by token, each of a chunk's tokens read the whole span: a 20-token chunk at a 32K span
// read the Qwen3-8B's cache 20 times per layer, on the few splits the planner leaves for 20 tokens
// (each CTA walking a whole kv head), and a mixed step took 2.5x a decode step.
//
// In runs mode the launch's CTAs are shared out anew: R runs x kv heads x C chunks work items,
// C as large as the grid, the span (kMinChunkKeys per chunk), the workspace (partials stay per
// token) and the tickets allow. With C > 1 the items fill at most the grid, one per CTA; a grid
// smaller than R x kv heads takes C = 1 and each CTA every grid-th item (a 93-token chunk of
// Qwen3-8B on two splits: 192 items on 186 CTAs). A call in which every sequence has one token
// keeps the planned mapping (cta_work), as do cluster launches (the launch makes none for a call
// with fewer sequences than tokens), the fold and NINFER_DECODE_RUNS=0.
#pragma once

#include "attention/decode_merge.cuh"

namespace ninfer::cuda_plugin::attention {

// Index of token t's sequence's first token in this launch (a sequence may begin before tb).
__device__ inline int64_t seq_first(const ninfer_attention_args& a, int64_t tb, int64_t t) {
  return max(static_cast<int64_t>(a.batch.seq_start[a.batch.token_seq[t]]), tb);
}

// A run begins at every per_run-th token of a sequence in the launch.
__device__ inline bool run_leader(const ninfer_attention_args& a, int64_t tb, int64_t t, int per_run) {
  return (t - seq_first(a, tb, t)) % per_run == 0;
}

struct DecodeRuns {
  int per_run;   // tokens per run at most
  int count;     // runs in the launch; 0: not in runs mode
  int chunks;    // key chunks per (run, kv head)
  int64_t items; // count x kv heads x chunks
};

// Every CTA computes the same value from the batch arrays. The whole warp calls it.
__device__ inline DecodeRuns decode_runs(const ninfer_attention_args& a, int64_t tb, int64_t te, int per_run,
                                         const LaunchScratch& ws) {
  DecodeRuns r{per_run, 0, 1, 0};
  // A call with as many sequences as the launch has tokens holds no run (decode_cluster's rule,
  // from the batch's own count): a decode step reads no more batch entries than before.
  if (per_run < 2 || !ws.runs || cluster_ctas() > 1 || a.batch.num_seqs >= te - tb) return r;
  // Lanes take 32 tokens at once (launch_longest).
  int count = 0;
  for (int64_t t0 = tb; t0 < te; t0 += 32) {
    const int64_t t = t0 + (threadIdx.x & 31);
    count += __popc(__ballot_sync(kFullMask, t < te && run_leader(a, tb, t, per_run)));
  }
  const int kvh = a.cache.kv_heads, group = a.heads / kvh;
  const int64_t tokens = te - tb, ctas = static_cast<int64_t>(gridDim.x) * gridDim.y;
  if (count == tokens) return r;
  r.count = count;
  int64_t chunks = min(ctas / (static_cast<int64_t>(count) * kvh),
                       static_cast<int64_t>(launch_longest(a, tb, te) / kMinChunkKeys));
  // Partials stay per (token, kv head, chunk), so the workspace bounds the chunks; so do the
  // tickets, one per (run, kv head).
  chunks = min(chunks, ws.partial_floats / (tokens * kvh * group * partial_floats(a.cache.head_dim)));
  if (!ws.tickets || tokens * kvh > kDecodeMaxPartials) chunks = 1;
  r.chunks = static_cast<int>(max(static_cast<int64_t>(1), chunks)); // 1 where the items outnumber the CTAs
  r.items = static_cast<int64_t>(count) * kvh * r.chunks;
  return r;
}

// One work item of a CTA: a run of n tokens of one sequence (n = 1 outside runs mode), one kv
// head, one key chunk [k0, k1) of the run's span.
struct RunItem {
  int64_t item; // runs mode: the item's index
  int64_t tt;   // the run's first token, within the launch
  int n, slot, pos; // tokens, their sequence's slot, the first token's position
  bool ok;          // the first token lies in the cache
  int kh, chunk, chunks, k0, k1;
  int min_last; // the smallest last visible key of the run's rows (-1: some row sees none)
  int gstep;    // outside runs mode: kv heads between the CTA's items (cta_work)
  int cluster;  // cta_work's: CTAs whose rows meet in shared memory, 0: none
  // Row r of the A fragment: token r / group of the run, query head kh * group + r % group.
  __device__ int last(int r, int group, const ninfer_kv_cache& c) const {
    const int j = r / group;
    return j < n && in_cache(c, slot, pos + j) ? min(k1 - 1, pos + j) : -1;
  }
};

__device__ inline RunItem run_item(const ninfer_attention_args& a, int64_t tb, int64_t tt, int n, int kh, int chunk,
                                   int chunks) {
  RunItem it;
  const int64_t t = tb + tt;
  it.item = 0, it.tt = tt, it.n = n, it.kh = kh, it.chunk = chunk, it.chunks = chunks, it.gstep = 0, it.cluster = 0;
  it.slot = a.batch.seq_slot[a.batch.token_seq[t]];
  it.pos = a.batch.token_pos[t];
  it.ok = in_cache(a.cache, it.slot, it.pos);
  const KeyRange keys = chunk_keys(it.ok ? min(it.pos + n, a.cache.capacity) : 0, chunks, chunk);
  it.k0 = keys.k0, it.k1 = keys.k1;
  it.min_last = it.ok && it.pos + n <= a.cache.capacity ? min(it.k1 - 1, it.pos) : -1;
  return it;
}

// Work item `i` of runs mode: (run, kv head, chunk), chunks fastest. The whole warp calls it.
__device__ inline RunItem runs_item(const ninfer_attention_args& a, int64_t tb, int64_t te, const DecodeRuns& r,
                                    int64_t i) {
  const int kvh = a.cache.kv_heads;
  const int chunk = static_cast<int>(i % r.chunks), kh = static_cast<int>(i / r.chunks % kvh);
  int run = static_cast<int>(i / (static_cast<int64_t>(r.chunks) * kvh));
  int64_t t = tb;
  for (int64_t t0 = tb;; t0 += 32) { // the run-th leader, 32 tokens at once
    const int64_t tl = t0 + (threadIdx.x & 31);
    unsigned m = __ballot_sync(kFullMask, tl < te && run_leader(a, tb, tl, r.per_run));
    if (run < __popc(m)) {
      for (; run > 0; --run) m &= m - 1;
      t = t0 + __ffs(m) - 1;
      break;
    }
    run -= __popc(m);
  }
  const int64_t end = min(te, static_cast<int64_t>(a.batch.seq_start[a.batch.token_seq[t] + 1]));
  RunItem it = run_item(a, tb, t - tb, static_cast<int>(min(static_cast<int64_t>(r.per_run), end - t)), kh, chunk,
                        r.chunks);
  it.item = i;
  return it;
}

// The item after `it` of a CTA: in runs mode the grid-th next one; otherwise the next kv head of
// cta_work's. False when none is left. The whole warp calls it.
__device__ inline bool next_item(const ninfer_attention_args& a, int64_t tb, int64_t te, const DecodeRuns& r,
                                 RunItem& it) {
  if (r.count) {
    const int64_t i = it.item + static_cast<int64_t>(gridDim.x) * gridDim.y;
    if (i >= r.items) return false;
    it = runs_item(a, tb, te, r, i);
    return true;
  }
  it.kh += it.gstep;
  return it.kh < a.cache.kv_heads;
}

// The CTA's first item; `any` false when it has none.
__device__ inline RunItem first_item(const ninfer_attention_args& a, int64_t tb, int64_t te, const DecodeRuns& r,
                                     const CtaWork& w, bool& any) {
  if (r.count) {
    const int64_t i = blockIdx.x + static_cast<int64_t>(blockIdx.y) * gridDim.x;
    any = i < r.items;
    return any ? runs_item(a, tb, te, r, i) : run_item(a, tb, 0, 1, a.cache.kv_heads, 0, 1);
  }
  RunItem it;
  it.tt = w.tt, it.n = 1, it.slot = w.slot, it.pos = w.pos, it.ok = w.ok;
  it.kh = w.g0, it.chunk = w.chunk, it.chunks = w.chunks, it.k0 = w.k0, it.k1 = w.k1;
  it.min_last = w.k1 - 1;
  it.gstep = w.gstep, it.cluster = w.cluster;
  any = w.g0 < a.cache.kv_heads;
  return it;
}

// Keys of the item's sequence that this call does not write: those before its first position in
// the call (the call's tokens of one sequence sit at consecutive positions, token_batch.h).
// Earlier steps wrote them, so a kernel may read them before its launch wait.
__device__ inline int settled_keys(const ninfer_attention_args& a, int64_t tb, const RunItem& it) {
  if (!it.ok) return 0;
  const int64_t t = tb + it.tt;
  return it.pos - static_cast<int>(t - a.batch.seq_start[a.batch.token_seq[t]]);
}

} // namespace ninfer::cuda_plugin::attention
