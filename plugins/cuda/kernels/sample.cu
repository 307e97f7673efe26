// sample on the GPU (contract: ninfer/abi/ops/sample.h): one CTA per logits row, no sort.
//   1. one pass: max (lowest id), NaN/+inf check, sum of exp for the log-probability;
//   2. top-k: radix select of the k-th largest logit key (4 passes of 8-bit digit counts);
//   3. top-p: the top-k mass (one pass), then a radix select of the key where the mass of the
//      larger keys first reaches top_p of it (4 passes of 8-bit digit masses);
//   4. the kept mass S (one pass) and the inverse CDF in id order (a block scan per tile of
//      the row, stopping at the tile that holds the draw).
// Weights are the contract's exact 64-bit fixed point, so sums in any order are the same and
// the id equals the CPU reference's. Shared memory only: no workspace, no host sync (graph-safe).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>

#include "../cuda_variant.hpp"
#include "ninfer/abi/ops/sample.h"
#include "ninfer/abi/ops/sample_math.h"

namespace ninfer::cuda_plugin {
namespace {

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

// Radix select over the logit keys: returns the key K with (amount of larger keys) < t <=
// (amount of keys >= K), where an element's amount is 1 (by_mass false) or its weight W. With
// `limit_on`, only keys above `limit` take part, plus `limit_count` elements at `limit` itself
// (the top-k ties). `t` returns what is left of it at K (t - amount of larger keys).
__device__ uint32_t radix_select(const RowView& v, Shared& sh, bool by_mass, bool limit_on, uint32_t limit,
                                 u64 limit_count, u64& t) {
  uint32_t prefix = 0, mask = 0;
  const u64 limit_w = (by_mass && limit_on) ? v.fixed(ninfer_sample_key_value(limit)) : 1;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += blockDim.x) sh.hist[b] = 0;
    __syncthreads();
    // Run-length flush: neighbouring elements of one thread usually share a digit, so the
    // shared-memory atomics stay few even when every logit falls into a handful of bins.
    int run_bin = -1;
    u64 run = 0;
    for (int j = threadIdx.x; j < v.vocab; j += blockDim.x) {
      const float l = v.row[j];
      const uint32_t key = ninfer_sample_key(l);
      if ((key & mask) != prefix) continue;
      if (limit_on && key <= limit) continue;
      const int bin = static_cast<int>((key >> shift) & 255u);
      const u64 amount = by_mass ? v.fixed(l) : 1;
      if (bin != run_bin) {
        if (run) atomicAdd(&sh.hist[run_bin], run);
        run_bin = bin;
        run = 0;
      }
      run += amount;
    }
    if (run) atomicAdd(&sh.hist[run_bin], run);
    if (threadIdx.x == 0 && limit_on && (limit & mask) == prefix)
      atomicAdd(&sh.hist[(limit >> shift) & 255u], limit_count * limit_w);
    __syncthreads();
    select_bin(sh, t);
    __syncthreads();
    const unsigned bin = sh.sel_bin;
    t -= sh.sel_before;
    __syncthreads();
    if (bin > 255) return 0; // not reached: callers pass t <= the total
    prefix |= bin << shift;
    mask |= 255u << shift;
  }
  return prefix;
}

} // namespace
} // namespace ninfer::cuda_plugin

using namespace ninfer::cuda_plugin;

extern "C" __global__ void __launch_bounds__(512) ninfer_sample_rows(ninfer_sample_args a, int64_t first) {
  __shared__ Shared sh;
  const int64_t r = first + blockIdx.x;
  const float* row = a.logits + r * a.row_stride;
  const int V = a.vocab;
  const ninfer_sample_row P = a.params[r];

  // 1. Max (lowest id), invalid entries, sum of exp(l - max) (float, for the log-probability).
  float mx = -INFINITY, sum = 0.f;
  int idx = 0x7fffffff, bad = 0;
  for (int j = threadIdx.x; j < V; j += blockDim.x) {
    const float x = row[j];
    if (isnan(x) || x == INFINITY) {
      bad = 1;
      continue;
    }
    if (x == -INFINITY) continue;
    if (x > mx) {
      sum = sum * __expf(mx - x) + 1.f;
      mx = x;
      idx = j;
    } else {
      sum += __expf(x - mx);
    }
  }
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
    if (threadIdx.x == 0) {
      a.ids[r] = -1;
      if (a.logprob) a.logprob[r] = NAN;
    }
    return;
  }
  const float log_sum = logf(sum);
  if (!(P.temperature > 0)) {
    if (threadIdx.x == 0) {
      a.ids[r] = idx;
      if (a.logprob) a.logprob[r] = (row[idx] - mx) - log_sum;
    }
    return;
  }

  const RowView v{row, V, mx, 1.0 / P.temperature, ninfer_sample_shift(V)};
  bool cut_on = false; // the head: keys above `cut`, and the first `q` (id order) at `cut`
  uint32_t cut = 0;
  u64 q = 0;

  // 2. top-k.
  if (P.top_k > 0 && P.top_k < V) {
    u64 t = static_cast<u64>(P.top_k);
    cut = radix_select(v, sh, false, false, 0, 0, t);
    q = t;
    cut_on = true;
  }

  // 3. top-p over the top-k distribution.
  if (P.top_p < 1.0) {
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
    if (target <= sk) {
      u64 t = target;
      const uint32_t kp = radix_select(v, sh, true, cut_on, cut, q, t);
      const u64 wt = v.fixed(ninfer_sample_key_value(kp));
      cut = kp;
      q = (t + wt - 1) / wt; // ties kept while the mass before them is below the target
      cut_on = true;
    }
  }

  // 4. min-p and zero weights, the kept mass, and the draw.
  const bool minp_on = P.min_p > 0;
  const double min_p = fmin(P.min_p, 1.0);
  u64 wtie = 0; // weight of each kept tie at `cut`
  if (cut_on) {
    const double w = v.weight(ninfer_sample_key_value(cut));
    const u64 W = ninfer_sample_fixed(w, v.shift);
    if (W > 0 && !(minp_on && w < min_p)) wtie = W;
  }
  auto kept_weight = [&](float l, uint32_t key) -> u64 {
    if (cut_on && key <= cut) return 0;
    const double w = v.weight(l);
    const u64 W = ninfer_sample_fixed(w, v.shift);
    return (minp_on && w < min_p) ? 0 : W;
  };
  u64 part = 0;
  for (int j = threadIdx.x; j < V; j += blockDim.x) {
    const float l = row[j];
    part += kept_weight(l, ninfer_sample_key(l));
  }
  const u64 S = block_sum(part, sh) + q * wtie;
  const u64 U = ninfer_sample_mulhi(ninfer_sample_draw(P.seed, P.counter), S);

  if (threadIdx.x == 0) sh.found = 0;
  u64 carry_w = 0, carry_t = 0;
  for (int base = 0; base < V; base += blockDim.x) {
    const int j = base + static_cast<int>(threadIdx.x);
    u64 w = 0, tie = 0;
    if (j < V) {
      const float l = row[j];
      const uint32_t key = ninfer_sample_key(l);
      w = kept_weight(l, key);
      tie = (cut_on && key == cut) ? 1 : 0;
    }
    u64 tw, tt;
    const u64 iw = block_scan(w, sh, tw), it = block_scan(tie, sh, tt);
    const u64 ct_in = carry_t + it, ct_ex = ct_in - tie;
    const u64 cum_in = carry_w + iw + (ct_in < q ? ct_in : q) * wtie;
    const u64 cum_ex = carry_w + iw - w + (ct_ex < q ? ct_ex : q) * wtie;
    if (j < V && cum_ex <= U && U < cum_in) {
      a.ids[r] = j;
      if (a.logprob) a.logprob[r] = (row[j] - mx) - log_sum;
      sh.found = 1;
    }
    __syncthreads();
    if (sh.found) return;
    carry_w += tw;
    carry_t += tt;
  }
  if (threadIdx.x == 0) { // not reached (U < S); never leave the row unwritten
    a.ids[r] = -1;
    if (a.logprob) a.logprob[r] = NAN;
  }
}

namespace ninfer::cuda_plugin {
namespace {

int32_t supports(const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0 && s->dims[0] <= (1 << 30); }

int32_t launch(const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  ninfer_sample_args a = *static_cast<const ninfer_sample_args*>(args);
  int64_t first = l->token_begin;
  void* params[] = {&a, &first};
  const cudaError_t rc = cudaLaunchKernel(reinterpret_cast<const void*>(ninfer_sample_rows),
                                          dim3(static_cast<unsigned>(l->token_end - l->token_begin)), dim3(l->block),
                                          params, 0, static_cast<cudaStream_t>(stream));
  if (rc != cudaSuccess) {
    std::snprintf(err, err_len, "sample: %lld rows of %d: %s", static_cast<long long>(l->token_end - first), a.vocab,
                  cudaGetErrorString(rc));
    return NINFER_ERR_LAUNCH;
  }
  return NINFER_OK;
}

int32_t query(ninfer_kernel_resources* out, char* err, size_t err_len) {
  return query_kernel_attributes(reinterpret_cast<const void*>(ninfer_sample_rows), "ninfer_sample_rows", kThreads,
                                 out, err, err_len);
}

int32_t driver_blocks(size_t dyn, int32_t* blocks, char* err, size_t err_len) {
  return query_driver_blocks(reinterpret_cast<const void*>(ninfer_sample_rows), kThreads, dyn, blocks, err, err_len);
}

} // namespace

int32_t register_sample(const ninfer_registrar* r, char* err, size_t err_len) {
  static ninfer_variant v{};
  const BuildResource* res = find_build_resource("ninfer_sample_rows");
  if (!res) {
    std::snprintf(err, err_len, "sample: kernel missing from the build resource table");
    return NINFER_ERR_UNSUPPORTED;
  }
  v.op = NINFER_OP_SAMPLE;
  v.name = "block_per_row_radix";
  v.exec = NINFER_EXEC_CUDA;
  v.geometry = NINFER_GEOMETRY_TOKEN_TILED; // one CTA per row; any grid is legal (not cooperative)
  v.split_k = 1;
  v.tokens_per_cta = 1;
  v.dtype_mask = 1u << NINFER_DTYPE_F32;
  v.resources = make_resources(*res, kThreads);
  v.supports = supports;
  v.launch = launch;
  v.query_loaded_resources = query;
  v.query_driver_blocks_per_sm = driver_blocks;
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cuda_plugin
