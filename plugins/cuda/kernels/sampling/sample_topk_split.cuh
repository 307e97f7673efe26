// The sample op's topk_split form (contract: ninfer/abi/ops/sample.h) for the rows a decode step
// samples most: greedy ones and those with 0 < top_k <= kMaxK (Qwen's recommended top_k is 20).
// Their kept set lies inside the top k ranks, so nothing but those ranks, the row's maximum and
// its log-sum-exp needs the whole row. A row is cut into slices of kSliceElems entries, one CTA
// each (grid.x), so a step of one sequence reads its 248,320 logits on 61 SMs instead of one:
//   1. a slice CTA keeps its top k (rank: logit descending, id ascending, a total order):
//      every thread sorts its kPerThread entries, each warp merges its 32 lanes' lists by
//      shuffles, warp 0 merges the warps' lists; with them it writes the slice's maximum, sum of
//      exp and invalid-entry flag to the launch workspace;
//   2. the CTA that takes the row's ticket last merges the slices' lists (in slice order for
//      the log-sum-exp: deterministic) into the row's top k, then warp 0 weighs those ranks in
//      the contract's fixed point, applies top-p and min-p, and draws in id order.
// Sums of fixed-point weights are exact in any order, so the id is the CPU reference's. A row
// this path does not take (top_k off or above kMaxK) is sampled whole by the row's first CTA
// with the one-CTA algorithm (sampling/sample_row.cuh); its other CTAs return at once.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ninfer/abi/ops/sample.h"
#include "ninfer/abi/ops/sample_math.h"
#include "sampling/sample_row.cuh"

namespace ninfer::cuda_plugin::sample_topk_split {

using u64 = unsigned long long;
constexpr unsigned kFull = 0xffffffffu;
constexpr int kThreads = sample_row_form::kThreads; // the fallback runs the one-CTA algorithm
constexpr int kWarps = kThreads / 32;
constexpr int kPerThread = 8;
constexpr int kSliceElems = kThreads * kPerThread; // 4,096 entries per CTA
constexpr int kMaxK = 64;                          // the largest top_k this path takes
constexpr int kMaxSlices = 64;                     // vocabularies up to 262,144 entries

__host__ __device__ constexpr int slices_for(long long vocab) {
  return static_cast<int>((vocab + kSliceElems - 1) / kSliceElems);
}

// One ranked entry. Ids are unique (padding past the vocabulary takes ids from it on), so the
// rank order is total; kNone ranks below every entry and marks an exhausted list.
struct Cand {
  float value;
  int id;
};
constexpr int kNoneId = 0x7fffffff;

__device__ __forceinline__ bool ranks_before(const Cand& a, const Cand& b) {
  return a.value > b.value || (a.value == b.value && a.id < b.id);
}

// A slice's share of the log-sum-exp and the invalid-entry test.
struct SlicePart {
  float max; // -inf when the slice holds no finite entry
  float sum; // sum of exp(l - max) over its finite entries
  int bad;   // a NaN or +inf entry
  int pad;
};

__device__ __forceinline__ Cand warp_best(Cand c) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const Cand other{__shfl_xor_sync(kFull, c.value, o), __shfl_xor_sync(kFull, c.id, o)};
    if (ranks_before(other, c)) c = other;
  }
  return c;
}

// Warp 0: the first k ranks of `nlists` sorted lists of k entries each (entry h of list l is
// load(l, h)), into out[0, k). Each round every lane offers the best head of its lists, the warp
// keeps the best, and the lane whose list it headed advances that list (ids are unique).
template <class Load>
__device__ void merge_lists(Load load, int nlists, int k, int* heads, Cand* out) {
  const int lane = threadIdx.x & 31;
  for (int l = lane; l < nlists; l += 32) heads[l] = 0;
  __syncwarp();
  for (int round = 0; round < k; ++round) {
    Cand mine{-INFINITY, kNoneId};
    int from = -1;
    for (int l = lane; l < nlists; l += 32) {
      const int h = heads[l];
      if (h < k) {
        const Cand c = load(l, h);
        if (ranks_before(c, mine)) {
          mine = c;
          from = l;
        }
      }
    }
    const Cand best = warp_best(mine);
    if (from >= 0 && mine.id == best.id) ++heads[from];
    if (lane == 0) out[round] = best;
    __syncwarp();
  }
}

// Sorts a thread's entries by rank (a fixed network: the indices stay compile-time, registers).
__device__ __forceinline__ void sort_entries(Cand (&c)[kPerThread]) {
#pragma unroll
  for (int i = 1; i < kPerThread; ++i)
#pragma unroll
    for (int j = i; j > 0; --j)
      if (ranks_before(c[j], c[j - 1])) {
        const Cand t = c[j];
        c[j] = c[j - 1];
        c[j - 1] = t;
      }
}

struct SliceShared {
  Cand warp_lists[kWarps * kMaxK];
  int heads[kMaxSlices > kWarps ? kMaxSlices : kWarps];
  float warp_max[kWarps];
  float warp_sum[kWarps];
  int warp_bad[kWarps];
  int last;
};

// Step 1 for slice blockIdx.x of row r: its top k into `mine` (k entries), its partial into
// `part`.
__device__ void slice_top_k(const float* row, int vocab, int k, Cand* mine, SlicePart* part, SliceShared& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int base = static_cast<int>(blockIdx.x) * kSliceElems + static_cast<int>(threadIdx.x);
  Cand c[kPerThread];
  float mx = -INFINITY, sum = 0.f;
  int bad = 0;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int j = base + i * kThreads;
    // Past the vocabulary: -inf with the entry's own id (above every real id), so padding
    // ranks below the row's own -inf entries and ids stay unique.
    const float x = j < vocab ? __ldg(row + j) : -INFINITY;
    c[i] = Cand{x, j};
    if (isnan(x) || x == INFINITY) {
      bad = 1;
    } else if (x > mx) {
      sum = sum * __expf(mx - x) + 1.f;
      mx = x;
    } else if (x != -INFINITY) {
      sum += __expf(x - mx);
    }
  }
  // The slice's max and sum of exp, as sample_row's first pass merges them.
  for (int o = 16; o > 0; o >>= 1) {
    const float om = __shfl_xor_sync(kFull, mx, o), os = __shfl_xor_sync(kFull, sum, o);
    const float nm = fmaxf(mx, om);
    sum = (sum == 0.f ? 0.f : sum * __expf(mx - nm)) + (os == 0.f ? 0.f : os * __expf(om - nm));
    mx = nm;
    bad |= __shfl_xor_sync(kFull, bad, o);
  }
  if (lane == 0) {
    sh.warp_max[warp] = mx;
    sh.warp_sum[warp] = sum;
    sh.warp_bad[warp] = bad;
  }
  // The warp's top k: its lanes' sorted lists merged, one rank per round.
  sort_entries(c);
  for (int round = 0; round < k; ++round) {
    const Cand best = warp_best(c[0]);
    if (c[0].id == best.id) { // this lane's head won: pop it
#pragma unroll
      for (int i = 0; i + 1 < kPerThread; ++i) c[i] = c[i + 1];
      c[kPerThread - 1] = Cand{-INFINITY, kNoneId};
    }
    if (lane == 0) sh.warp_lists[warp * kMaxK + round] = best;
  }
  __syncthreads();
  if (warp != 0) return;
  merge_lists([&](int l, int h) { return sh.warp_lists[l * kMaxK + h]; }, kWarps, k, sh.heads, mine);
  if (lane == 0) {
    float m = -INFINITY, s = 0.f;
    int b = 0;
    for (int w = 0; w < kWarps; ++w) { // warp order: deterministic
      const float wm = sh.warp_max[w], ws = sh.warp_sum[w];
      const float nm = fmaxf(m, wm);
      s = (s == 0.f ? 0.f : s * __expf(m - nm)) + (ws == 0.f ? 0.f : ws * __expf(wm - nm));
      m = nm;
      b |= sh.warp_bad[w];
    }
    *part = SlicePart{m, s, b, 0};
  }
}

__device__ __forceinline__ void write_result(const ninfer_sample_args& a, int64_t r, int id, float logprob) {
  a.ids[r] = id;
  if (a.logprob) a.logprob[r] = logprob;
}

// Step 2, warp 0 of the row's last CTA: `top` holds the row's first k ranks; parts the slices'.
__device__ void draw_from_top(const ninfer_sample_args& a, int64_t r, const ninfer_sample_row& P, int k,
                              const Cand* top, const SlicePart* parts, int slices) {
  __shared__ u64 kept_w[kMaxK];
  const int lane = threadIdx.x & 31;
  float mx = -INFINITY, sum = 0.f;
  int bad = 0;
  for (int s = 0; s < slices; ++s) { // slice order: deterministic (every lane alike)
    const SlicePart p{__ldcg(&parts[s].max), __ldcg(&parts[s].sum), __ldcg(&parts[s].bad), 0};
    const float nm = fmaxf(mx, p.max);
    sum = (sum == 0.f ? 0.f : sum * __expf(mx - nm)) + (p.sum == 0.f ? 0.f : p.sum * __expf(p.max - nm));
    mx = nm;
    bad |= p.bad;
  }
  if (bad || top[0].value == -INFINITY) { // an invalid entry, or every entry -inf
    if (lane == 0) write_result(a, r, -1, NAN);
    return;
  }
  const float lp_base = -mx - logf(sum); // logprob of token j = l[j] + lp_base
  if (ninfer_sample_greedy(P.temperature)) {
    if (lane == 0) write_result(a, r, top[0].id, (top[0].value - mx) - logf(sum));
    return;
  }
  // Weights of ranks lane and lane + 32 (kMaxK = 64), in the contract's fixed point.
  const double inv_t = 1.0 / P.temperature;
  const int shift = ninfer_sample_shift(a.vocab);
  double w[2];
  u64 W[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = lane + 32 * h;
    w[h] = i < k ? ninfer_sample_weight(top[i].value, mx, inv_t) : 0.0;
    W[h] = i < k ? ninfer_sample_fixed(w[h], shift) : 0;
  }
  // top-p over the top-k mass: rank i is kept while the mass of the ranks before it is below
  // the target (rank 0 always).
  u64 incl0 = W[0], incl1 = W[1];
  for (int o = 1; o < 32; o <<= 1) {
    const u64 y0 = __shfl_up_sync(kFull, incl0, o), y1 = __shfl_up_sync(kFull, incl1, o);
    if (lane >= o) {
      incl0 += y0;
      incl1 += y1;
    }
  }
  const u64 total0 = __shfl_sync(kFull, incl0, 31);
  const u64 before0 = incl0 - W[0], before1 = total0 + incl1 - W[1];
  bool keep[2] = {lane < k, lane + 32 < k};
  if (P.top_p < 1.0) {
    const u64 sk = total0 + __shfl_sync(kFull, incl1, 31);
    const double tt = ceil(P.top_p * static_cast<double>(sk));
    u64 target = tt > 0 ? static_cast<u64>(tt) : 0;
    if (target < 1) target = 1;
    keep[0] = keep[0] && before0 < target;
    keep[1] = keep[1] && before1 < target;
  }
  const bool minp_on = P.min_p > 0;
  const double min_p = fmin(P.min_p, 1.0);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    keep[h] = keep[h] && W[h] > 0 && !(minp_on && w[h] < min_p);
    if (lane + 32 * h < kMaxK) kept_w[lane + 32 * h] = keep[h] ? W[h] : 0;
  }
  __syncwarp();
  u64 S = (keep[0] ? W[0] : 0) + (keep[1] ? W[1] : 0);
  for (int o = 16; o > 0; o >>= 1) S += __shfl_xor_sync(kFull, S, o);
  const u64 U = ninfer_sample_mulhi(ninfer_sample_draw(P.seed, P.counter), S);
  // The first kept token in id order whose inclusive running sum exceeds U: the running sum of
  // a kept token is the weight of the kept tokens of no larger id.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = lane + 32 * h;
    if (!keep[h]) continue;
    u64 incl = 0;
    for (int j = 0; j < k; ++j)
      if (top[j].id <= top[i].id) incl += kept_w[j];
    if (incl - W[h] <= U && U < incl) write_result(a, r, top[i].id, top[i].value + lp_base);
  }
}

// One CTA of the topk_split launch: slice blockIdx.x of row first + blockIdx.y. `cands` holds
// kMaxK entries per (row, slice), `parts` one SlicePart per (row, slice); tickets one per row.
__device__ void sample_split(const ninfer_sample_args& a, int64_t first, Cand* cands, SlicePart* parts,
                             unsigned* tickets) {
  __shared__ SliceShared sh;
  const int64_t r = first + blockIdx.y;
  const ninfer_sample_row P = a.params[r];
  const bool greedy = ninfer_sample_greedy(P.temperature);
  if (!greedy && !(P.top_k > 0 && P.top_k <= kMaxK && P.top_k < a.vocab)) {
    if (blockIdx.x == 0) sample_row_form::sample_row<true>(a, r);
    return;
  }
  const int k = greedy ? 1 : P.top_k;
  const int slices = static_cast<int>(gridDim.x);
  Cand* row_cands = cands + static_cast<int64_t>(blockIdx.y) * slices * kMaxK;
  SlicePart* row_parts = parts + static_cast<int64_t>(blockIdx.y) * slices;
  slice_top_k(a.logits + r * a.row_stride, a.vocab, k, row_cands + blockIdx.x * kMaxK, row_parts + blockIdx.x, sh);
  if (threadIdx.x == 0) {
    __threadfence(); // the slice's list and partial before its ticket
    sh.last = atomicInc(&tickets[blockIdx.y], static_cast<unsigned>(slices - 1)) == static_cast<unsigned>(slices - 1);
  }
  __syncthreads();
  if (!sh.last || threadIdx.x >= 32) return;
  __threadfence(); // the other slices' lists after their tickets
  // The slices' lists are read through L2 (ld.cg: written by other CTAs of this launch).
  __shared__ Cand top[kMaxK];
  merge_lists(
      [&](int l, int h) {
        const Cand* c = row_cands + l * kMaxK + h;
        return Cand{__ldcg(&c->value), __ldcg(&c->id)};
      },
      slices, k, sh.heads, top);
  draw_from_top(a, r, P, k, top, row_parts, slices);
}

} // namespace ninfer::cuda_plugin::sample_topk_split
