// The sample op's one-CTA algorithm (contract: ninfer/abi/ops/sample.h): a CTA of kThreads
// threads takes one logits row, no sort.
//   1. one pass: max (lowest id), NaN/+inf check, sum of exp for the log-probability;
//   2. top-k: radix select of the k-th largest logit key (4 passes of 8-bit digit counts);
//   3. top-p: the top-k mass (one pass), then a radix select of the key where the mass of the
//      larger keys first reaches top_p of it (4 passes of 8-bit digit masses);
//   4. the kept mass S (one pass) and the inverse CDF in id order (a block scan per tile of
//      the row, stopping at the tile that holds the draw).
// Weights are the contract's exact 64-bit fixed point, so sums in any order are the same and
// the id equals the CPU reference's. Shared memory only: no workspace, no host sync (graph-safe).
// sample.cu launches it for every row (block_per_row*) and topk_split for the rows its split
// path does not take.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "ninfer/abi/ops/sample.h"
#include "ninfer/abi/ops/sample_math.h"

namespace ninfer::cuda_plugin::sample_row_form {

constexpr int kThreads = 512; // the launch's block size (the reductions read blockDim)
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFull = 0xffffffffu;
using u64 = unsigned long long;

struct Shared {
  u64 hist[256];
  u64 warp_u64[kWarps];
  float warp_max[kWarps];
  float warp_sum[kWarps];
  int warp_idx[kWarps];
  int warp_bad[kWarps];
  unsigned sel_bin;
  u64 sel_before;
  u64 total;
  int abort;
  int found;
};

__device__ __forceinline__ int lane_id() { return threadIdx.x & 31; }
__device__ __forceinline__ int warp_id() { return threadIdx.x >> 5; }
__device__ __forceinline__ int warps() { return static_cast<int>(blockDim.x >> 5); }

// Sum over the block, returned to every thread.
__device__ u64 block_sum(u64 v, Shared& sh) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  if (lane_id() == 0) sh.warp_u64[warp_id()] = v;
  __syncthreads();
  u64 t = 0;
  for (int w = 0; w < warps(); ++w) t += sh.warp_u64[w];
  __syncthreads();
  return t;
}

// Inclusive scan over the block in thread order; `total` gets the block's sum.
__device__ u64 block_scan(u64 v, Shared& sh, u64& total) {
  for (int o = 1; o < 32; o <<= 1) {
    const u64 y = __shfl_up_sync(kFull, v, o);
    if (lane_id() >= o) v += y;
  }
  if (lane_id() == 31) sh.warp_u64[warp_id()] = v;
  __syncthreads();
  u64 before = 0;
  total = 0;
  for (int w = 0; w < warps(); ++w) {
    if (w < warp_id()) before += sh.warp_u64[w];
    total += sh.warp_u64[w];
  }
  __syncthreads();
  return v + before;
}

// Warp 0: the bin b, walking from 255 down, where (sum of higher bins) < t <= (that + hist[b]).
// Writes sel_bin (256 when t exceeds the whole histogram) and sel_before.
__device__ void select_bin(Shared& sh, u64 t) {
  if (warp_id() != 0) return;
  const int hi = 255 - 8 * lane_id();
  u64 s = 0;
  for (int c = 0; c < 8; ++c) s += sh.hist[hi - c];
  u64 incl = s;
  for (int o = 1; o < 32; o <<= 1) {
    const u64 y = __shfl_up_sync(kFull, incl, o);
    if (lane_id() >= o) incl += y;
  }
  u64 before = incl - s;
  const bool mine = before < t && t <= incl;
  if (__ballot_sync(kFull, mine) == 0 && lane_id() == 0) {
    sh.sel_bin = 256;
    sh.sel_before = incl;
  }
  if (mine) {
    for (int c = 0; c < 8; ++c) {
      const u64 v = sh.hist[hi - c];
      if (t <= before + v) {
        sh.sel_bin = static_cast<unsigned>(hi - c);
        sh.sel_before = before;
        break;
      }
      before += v;
    }
  }
}

struct RowView {
  const float* row;
  int vocab;
  float max;
  double inv_t;
  int shift;
  __device__ double weight(float l) const { return ninfer_sample_weight(l, max, inv_t); }
  __device__ u64 fixed(float l) const { return ninfer_sample_fixed(weight(l), shift); }
};

// f(j, row[j]) for every j in [0, V), each j by one thread. The vector form reads float4s,
// two per thread per round, so more loads are in flight (one CTA per row is latency-bound).
template <bool kVec, class F>
__device__ __forceinline__ void for_each(const float* row, int V, F&& f) {
  if (kVec && (reinterpret_cast<uintptr_t>(row) & 15u) == 0) {
    const float4* r4 = reinterpret_cast<const float4*>(row);
    const int n4 = V >> 2, step = static_cast<int>(blockDim.x);
    int i = static_cast<int>(threadIdx.x);
    for (; i + step < n4; i += 2 * step) {
      const float4 a = __ldg(r4 + i), b = __ldg(r4 + i + step);
      f(4 * i, a.x);
      f(4 * i + 1, a.y);
      f(4 * i + 2, a.z);
      f(4 * i + 3, a.w);
      const int k = 4 * (i + step);
      f(k, b.x);
      f(k + 1, b.y);
      f(k + 2, b.z);
      f(k + 3, b.w);
    }
    if (i < n4) {
      const float4 a = __ldg(r4 + i);
      f(4 * i, a.x);
      f(4 * i + 1, a.y);
      f(4 * i + 2, a.z);
      f(4 * i + 3, a.w);
    }
    for (int j = 4 * n4 + static_cast<int>(threadIdx.x); j < V; j += step) f(j, row[j]);
  } else {
    for (int j = threadIdx.x; j < V; j += blockDim.x) f(j, row[j]);
  }
}

__device__ __forceinline__ u64 warp_inclusive_scan(u64 v) {
  for (int o = 1; o < 32; o <<= 1) {
    const u64 y = __shfl_up_sync(kFull, v, o);
    if (lane_id() >= o) v += y;
  }
  return v;
}

__device__ __forceinline__ u64 warp_sum(u64 v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// Radix select over the logit keys: the key K with (amount of larger keys) < t <= (amount of
// keys >= K), where an element's amount is 1 (by_mass false) or its weight W. With
// `limit_on`, only keys above `limit` take part, plus `limit_count` elements at `limit` itself
// (the top-k ties). `t` returns what is left of it at K (t - amount of larger keys). With
// top_p >= 0, t is not given but derived from the first pass, whose histogram holds the whole
// mass S: t = max(1, ceil(top_p * S)); returns false (and selects nothing) when t > S.
template <bool kVec>
__device__ bool radix_select(const RowView& v, Shared& sh, bool by_mass, bool limit_on, uint32_t limit,
                             u64 limit_count, double top_p, u64& t, uint32_t& key_out) {
  uint32_t prefix = 0, mask = 0;
  const u64 limit_w = (by_mass && limit_on) ? v.fixed(ninfer_sample_key_value(limit)) : 1;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += blockDim.x) sh.hist[b] = 0;
    __syncthreads();
    // Run-length flush: neighbouring elements of one thread usually share a digit, so the
    // shared-memory atomics stay few even when every logit falls into a handful of bins.
    int run_bin = -1;
    u64 run = 0;
    for_each<kVec>(v.row, v.vocab, [&](int, float l) {
      const uint32_t key = ninfer_sample_key(l);
      if ((key & mask) != prefix) return;
      if (limit_on && key <= limit) return;
      const int bin = static_cast<int>((key >> shift) & 255u);
      const u64 amount = by_mass ? v.fixed(l) : 1;
      if (bin != run_bin) {
        if (run) atomicAdd(&sh.hist[run_bin], run);
        run_bin = bin;
        run = 0;
      }
      run += amount;
    });
    if (run) atomicAdd(&sh.hist[run_bin], run);
    if (threadIdx.x == 0 && limit_on && (limit & mask) == prefix)
      atomicAdd(&sh.hist[(limit >> shift) & 255u], limit_count * limit_w);
    __syncthreads();
    if (shift == 24 && top_p >= 0) {
      if (warp_id() == 0) {
        u64 s = 0;
        for (int c = 0; c < 8; ++c) s += sh.hist[lane_id() * 8 + c];
        s = warp_sum(s);
        if (lane_id() == 0) {
          const double tt = ceil(top_p * static_cast<double>(s));
          u64 target = tt > 0 ? static_cast<u64>(tt) : 0;
          if (target < 1) target = 1;
          sh.total = target;
          sh.abort = target > s;
        }
      }
      __syncthreads();
      t = sh.total;
      if (sh.abort) return false; // every thread reads the same: top-p keeps everything
    }
    select_bin(sh, t);
    __syncthreads();
    const unsigned bin = sh.sel_bin;
    t -= sh.sel_before;
    __syncthreads();
    if (bin > 255) return false; // not reached: t <= the total
    prefix |= bin << shift;
    mask |= 255u << shift;
  }
  key_out = prefix;
  return true;
}

// What step 4 needs: the head (keys above `cut`, and the first `q` in id order at `cut`) and
// the min-p test.
struct Kept {
  RowView v;
  bool cut_on;
  uint32_t cut;
  u64 q;
  bool minp_on;
  double min_p;
  u64 wtie; // weight of each kept tie at `cut` (0 when min-p or underflow drops them)
  __device__ u64 weight(float l, uint32_t key) const {
    if (cut_on && key <= cut) return 0;
    const double w = v.weight(l);
    const u64 W = ninfer_sample_fixed(w, v.shift);
    return (minp_on && w < min_p) ? 0 : W;
  }
};

__device__ __forceinline__ void write_result(const ninfer_sample_args& a, int64_t r, int id, float logprob) {
  a.ids[r] = id;
  if (a.logprob) a.logprob[r] = logprob;
}

// Step 4, plain form: the kept mass in one pass, then a block scan per tile of the row in id
// order until the tile that holds the draw.
__device__ void draw_by_block_scan(const ninfer_sample_args& a, int64_t r, const Kept& k, uint64_t draw, Shared& sh,
                                   float lp_base) {
  const float* row = k.v.row;
  const int V = k.v.vocab;
  u64 part = 0;
  for (int j = threadIdx.x; j < V; j += blockDim.x) {
    const float l = row[j];
    part += k.weight(l, ninfer_sample_key(l));
  }
  const u64 S = block_sum(part, sh) + k.q * k.wtie;
  const u64 U = ninfer_sample_mulhi(draw, S);
  if (threadIdx.x == 0) sh.found = 0;
  u64 carry_w = 0, carry_t = 0;
  for (int base = 0; base < V; base += blockDim.x) {
    const int j = base + static_cast<int>(threadIdx.x);
    u64 w = 0, tie = 0;
    if (j < V) {
      const float l = row[j];
      const uint32_t key = ninfer_sample_key(l);
      w = k.weight(l, key);
      tie = (k.cut_on && key == k.cut) ? 1 : 0;
    }
    u64 tw, tt;
    const u64 iw = block_scan(w, sh, tw), it = block_scan(tie, sh, tt);
    const u64 ct_in = carry_t + it, ct_ex = ct_in - tie;
    const u64 cum_in = carry_w + iw + (ct_in < k.q ? ct_in : k.q) * k.wtie;
    const u64 cum_ex = carry_w + iw - w + (ct_ex < k.q ? ct_ex : k.q) * k.wtie;
    if (j < V && cum_ex <= U && U < cum_in) {
      write_result(a, r, j, row[j] + lp_base);
      sh.found = 1;
    }
    __syncthreads();
    if (sh.found) return;
    carry_w += tw;
    carry_t += tt;
  }
  if (threadIdx.x == 0) write_result(a, r, -1, NAN); // not reached (U < S)
}

// Step 4, tiled form: one pass in which each warp sums whole tiles of the row (kept weight and
// ties at the cut); warp 0 then scans the tile sums in id order, finds the tile that holds
// the draw and walks it 32 tokens at a time. Three block barriers in all.
constexpr int kMaxTiles = 1024;

__device__ void draw_by_tiles(const ninfer_sample_args& a, int64_t r, const Kept& k, uint64_t draw, float lp_base) {
  __shared__ u64 tile_w[kMaxTiles];
  __shared__ u64 tile_t[kMaxTiles];
  const float* row = k.v.row;
  const int V = k.v.vocab;
  int ts = (V + kMaxTiles - 1) / kMaxTiles;
  ts = ts < 32 ? 32 : (ts + 31) / 32 * 32;
  const int ntiles = (V + ts - 1) / ts;
  for (int tile = warp_id(); tile < ntiles; tile += warps()) {
    const int b = tile * ts, e = min(V, b + ts);
    u64 sw = 0, st = 0;
#pragma unroll 4
    for (int j = b + lane_id(); j < e; j += 32) {
      const float l = __ldg(row + j);
      const uint32_t key = ninfer_sample_key(l);
      sw += k.weight(l, key);
      st += (k.cut_on && key == k.cut) ? 1 : 0;
    }
    sw = warp_sum(sw);
    st = warp_sum(st);
    if (lane_id() == 0) {
      tile_w[tile] = sw;
      tile_t[tile] = st;
    }
  }
  __syncthreads();
  if (warp_id() != 0) return;

  const int per = (ntiles + 31) / 32, t0 = lane_id() * per, t1 = min(ntiles, t0 + per);
  u64 lw = 0, lt = 0;
  for (int t = t0; t < t1; ++t) {
    lw += tile_w[t];
    lt += tile_t[t];
  }
  const u64 iw = warp_inclusive_scan(lw), it = warp_inclusive_scan(lt);
  const u64 S = __shfl_sync(kFull, iw, 31) + k.q * k.wtie; // the ties at the cut number >= q
  const u64 U = ninfer_sample_mulhi(draw, S);
  auto cum = [&](u64 w, u64 t) { return w + (t < k.q ? t : k.q) * k.wtie; };
  u64 cw = iw - lw, ct = it - lt, fw = 0, ft = 0;
  int found = -1;
  for (int t = t0; t < t1; ++t) {
    const u64 start = cum(cw, ct);
    if (start <= U && U < cum(cw + tile_w[t], ct + tile_t[t])) {
      found = t;
      fw = cw;
      ft = ct;
    }
    cw += tile_w[t];
    ct += tile_t[t];
  }
  const unsigned who = __ballot_sync(kFull, found >= 0);
  if (who == 0) { // not reached (U < S)
    if (lane_id() == 0) write_result(a, r, -1, NAN);
    return;
  }
  const int src = __ffs(who) - 1;
  const int tile = __shfl_sync(kFull, found, src);
  u64 carry_w = __shfl_sync(kFull, fw, src), carry_t = __shfl_sync(kFull, ft, src);
  const int b = tile * ts, e = min(V, b + ts);
  for (int base = b; base < e; base += 32) {
    const int j = base + lane_id();
    u64 w = 0, tie = 0;
    if (j < e) {
      const float l = row[j];
      const uint32_t key = ninfer_sample_key(l);
      w = k.weight(l, key);
      tie = (k.cut_on && key == k.cut) ? 1 : 0;
    }
    const u64 sw = warp_inclusive_scan(w), st = warp_inclusive_scan(tie);
    const bool hit = j < e && cum(carry_w + sw - w, carry_t + st - tie) <= U && U < cum(carry_w + sw, carry_t + st);
    if (hit) write_result(a, r, j, row[j] + lp_base);
    if (__ballot_sync(kFull, hit)) return;
    carry_w += __shfl_sync(kFull, sw, 31);
    carry_t += __shfl_sync(kFull, st, 31);
  }
  if (lane_id() == 0) write_result(a, r, -1, NAN); // not reached
}

// Row r of the call, by the whole CTA (kThreads threads).
template <bool kVec>
__device__ void sample_row(const ninfer_sample_args& a, int64_t r) {
  __shared__ Shared sh;
  const float* row = a.logits + r * a.row_stride;
  const int V = a.vocab;
  const ninfer_sample_row P = a.params[r];

  // 1. Max (lowest id), invalid entries, sum of exp(l - max) (float, for the log-probability).
  float mx = -INFINITY, sum = 0.f;
  int idx = 0x7fffffff, bad = 0;
  for_each<kVec>(row, V, [&](int j, float x) {
    if (isnan(x) || x == INFINITY) {
      bad = 1;
      return;
    }
    if (x == -INFINITY) return;
    if (x > mx) {
      sum = sum * __expf(mx - x) + 1.f;
      mx = x;
      idx = j;
    } else {
      sum += __expf(x - mx);
      if (x == mx && j < idx) idx = j;
    }
  });
  for (int o = 16; o > 0; o >>= 1) {
    const float om = __shfl_xor_sync(kFull, mx, o), os = __shfl_xor_sync(kFull, sum, o);
    const int oi = __shfl_xor_sync(kFull, idx, o), ob = __shfl_xor_sync(kFull, bad, o);
    const float nm = fmaxf(mx, om);
    sum = (sum == 0.f ? 0.f : sum * __expf(mx - nm)) + (os == 0.f ? 0.f : os * __expf(om - nm));
    if (om > mx || (om == mx && oi < idx)) idx = oi;
    mx = nm;
    bad |= ob;
  }
  if (lane_id() == 0) {
    sh.warp_max[warp_id()] = mx;
    sh.warp_sum[warp_id()] = sum;
    sh.warp_idx[warp_id()] = idx;
    sh.warp_bad[warp_id()] = bad;
  }
  __syncthreads();
  mx = -INFINITY;
  idx = 0x7fffffff;
  bad = 0;
  for (int w = 0; w < warps(); ++w) {
    if (sh.warp_max[w] > mx || (sh.warp_max[w] == mx && sh.warp_idx[w] < idx)) {
      mx = sh.warp_max[w];
      idx = sh.warp_idx[w];
    }
    bad |= sh.warp_bad[w];
  }
  sum = 0.f;
  for (int w = 0; w < warps(); ++w)
    if (sh.warp_sum[w] != 0.f) sum += sh.warp_sum[w] * __expf(sh.warp_max[w] - mx);
  if (bad || idx == 0x7fffffff) {
    if (threadIdx.x == 0) write_result(a, r, -1, NAN);
    return;
  }
  const float lp_base = -mx - logf(sum); // logprob of token j = row[j] + lp_base
  if (ninfer_sample_greedy(P.temperature)) {
    if (threadIdx.x == 0) write_result(a, r, idx, (row[idx] - mx) - logf(sum));
    return;
  }

  const RowView v{row, V, mx, 1.0 / P.temperature, ninfer_sample_shift(V)};
  bool cut_on = false; // the head: keys above `cut`, and the first `q` (id order) at `cut`
  uint32_t cut = 0;
  u64 q = 0;

  // 2. top-k.
  if (P.top_k > 0 && P.top_k < V) {
    u64 t = static_cast<u64>(P.top_k);
    radix_select<kVec>(v, sh, false, false, 0, 0, -1.0, t, cut);
    q = t;
    cut_on = true;
  }

  // 3. top-p over the top-k distribution.
  if (P.top_p < 1.0) {
    u64 t = 0;
    uint32_t kp = 0;
    bool selected;
    if constexpr (kVec) {
      selected = radix_select<kVec>(v, sh, true, cut_on, cut, q, P.top_p, t, kp);
    } else {
      const u64 wc = cut_on ? v.fixed(ninfer_sample_key_value(cut)) : 0;
      u64 part = 0;
      for (int j = threadIdx.x; j < V; j += blockDim.x) {
        const float l = row[j];
        if (!cut_on || ninfer_sample_key(l) > cut) part += v.fixed(l);
      }
      const u64 sk = block_sum(part, sh) + q * wc;
      const double tt = ceil(P.top_p * static_cast<double>(sk));
      u64 target = tt > 0 ? static_cast<u64>(tt) : 0;
      if (target < 1) target = 1;
      t = target;
      selected = target <= sk && radix_select<kVec>(v, sh, true, cut_on, cut, q, -1.0, t, kp);
    }
    if (selected) {
      const u64 wt = v.fixed(ninfer_sample_key_value(kp));
      cut = kp;
      q = (t + wt - 1) / wt; // ties kept while the mass before them is below the target
      cut_on = true;
    }
  }

  // 4. min-p and zero weights, the kept mass, and the draw.
  Kept k{v, cut_on, cut, q, P.min_p > 0, fmin(P.min_p, 1.0), 0};
  if (cut_on) {
    const double w = v.weight(ninfer_sample_key_value(cut));
    const u64 W = ninfer_sample_fixed(w, v.shift);
    if (W > 0 && !(k.minp_on && w < k.min_p)) k.wtie = W;
  }
  const uint64_t draw = ninfer_sample_draw(P.seed, P.counter);
  if constexpr (kVec)
    draw_by_tiles(a, r, k, draw, lp_base);
  else
    draw_by_block_scan(a, r, k, draw, sh, lp_base);
}

} // namespace ninfer::cuda_plugin::sample_row_form
