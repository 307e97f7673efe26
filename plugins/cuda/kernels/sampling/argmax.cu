// argmax on the GPU (contract: ninfer/abi/ops/argmax.h). Each thread keeps running (max, first
// index, sum of exp relative to max) triples over its strided elements, then warps and the block
// merge those triples; one pass over the row. Two variants:
//   - block_per_row: one CTA of 1024 threads per row (batches: the rows fill the SMs);
//   - row_split: a row cut into slices of kSliceElems, one CTA of 512 threads each, the partial
//     triples meeting in the launch workspace; the CTA that takes the row's ticket last merges
//     them in slice order (deterministic). A decode step of one sequence otherwise scans a
//     248,320-entry row on one SM: 60 us of a 27B int4 step on an H100 (ncu).
#include <cuda_runtime.h>

#include <cfloat>
#include <cmath>

#include "ninfer/abi/ops/argmax.h"
#include "common/grid_dependency.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include <cstdio>

#include "../../cuda_variant.hpp"
#endif

namespace ninfer::cuda_plugin {
namespace {

constexpr int kThreads = 1024;      // block_per_row
constexpr int kSplitThreads = 512;  // row_split
constexpr int kSliceElems = 8192;   // row_split: entries per CTA (16 per thread)

// row_split's slices of a row.
__host__ __device__ constexpr int slices_for(long long vocab) {
  return static_cast<int>((vocab + kSliceElems - 1) / kSliceElems);
}

struct Best {
  float max;
  int idx;    // first index of max; INT_MAX when empty
  float sum;  // sum of exp(x - max)
  int nan;
};

__device__ __forceinline__ Best merge(Best a, Best b) {
  Best o;
  o.nan = a.nan | b.nan;
  if (b.max > a.max || (b.max == a.max && b.idx < a.idx)) {
    o.max = b.max;
    o.idx = b.idx;
  } else {
    o.max = a.max;
    o.idx = a.idx;
  }
  // Rescale both partial sums to the merged max (an empty side has max = -inf, sum = 0).
  const float sa = a.sum == 0.f ? 0.f : a.sum * __expf(a.max - o.max);
  const float sb = b.sum == 0.f ? 0.f : b.sum * __expf(b.max - o.max);
  o.sum = sa + sb;
  return o;
}

} // namespace
} // namespace ninfer::cuda_plugin

using ninfer::cuda_plugin::Best;
using ninfer::cuda_plugin::merge;

__device__ __forceinline__ void take(Best& b, float x, int j) {
  if (isnan(x)) {
    b.nan = 1;
    return;
  }
  if (x == -INFINITY) return;
  if (x > b.max) {
    b.sum = b.sum * __expf(b.max - x) + 1.f;
    b.max = x;
    b.idx = j;
  } else {
    b.sum += __expf(x - b.max);
  }
}

// kLanes independent accumulators per thread: the loads and exps of one do not wait for the
// others (a single dependent chain per thread left a 152k-entry row latency-bound, ~300 us).
constexpr int kLanes = 4;

// The thread's kLanes accumulators over row[begin, end), strided by the block.
__device__ __forceinline__ void scan(const float* row, int begin, int end, Best (&acc)[kLanes]) {
#pragma unroll
  for (int u = 0; u < kLanes; ++u) acc[u] = Best{-INFINITY, 0x7fffffff, 0.f, 0};
  const int step = static_cast<int>(blockDim.x);
  int j = begin + static_cast<int>(threadIdx.x);
  for (; j + (kLanes - 1) * step < end; j += kLanes * step) {
    float x[kLanes];
#pragma unroll
    for (int u = 0; u < kLanes; ++u) x[u] = row[j + u * step];
#pragma unroll
    for (int u = 0; u < kLanes; ++u) take(acc[u], x[u], j + u * step);
  }
  for (; j < end; j += step) take(acc[0], row[j], j);
}

// The block's triple (in thread 0) from every thread's accumulators.
__device__ __forceinline__ Best block_best(const Best (&acc)[kLanes]) {
  Best b = acc[0];
#pragma unroll
  for (int u = 1; u < kLanes; ++u) b = merge(b, acc[u]);
  for (int off = 16; off > 0; off >>= 1) {
    Best o{__shfl_xor_sync(0xffffffffu, b.max, off), __shfl_xor_sync(0xffffffffu, b.idx, off),
           __shfl_xor_sync(0xffffffffu, b.sum, off), __shfl_xor_sync(0xffffffffu, b.nan, off)};
    b = merge(b, o);
  }
  __shared__ Best warp_best[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_best[warp] = b;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w) b = merge(b, warp_best[w]);
  return b; // warp 0's lanes other than 0 hold their warp's only
}

__device__ __forceinline__ void store(const ninfer_argmax_args& a, int64_t r, const Best& t) {
  const bool bad = t.nan || t.idx == 0x7fffffff;
  a.ids[r] = bad ? -1 : t.idx;
  if (a.logprob) a.logprob[r] = bad ? NAN : -logf(t.sum);
}

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kThreads)
    ninfer_argmax_rows(ninfer_argmax_args a, int64_t first) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  const int64_t r = first + blockIdx.x;
  Best acc[kLanes];
  scan(a.logits + r * a.row_stride, 0, a.vocab, acc);
  const Best t = block_best(acc);
  if (threadIdx.x == 0) store(a, r, t);
}

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kSplitThreads)
    ninfer_argmax_split(ninfer_argmax_args a, int64_t first, Best* partials, unsigned* tickets) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  const int64_t r = first + blockIdx.y;
  const int slices = static_cast<int>(gridDim.x);
  const int begin = static_cast<int>(static_cast<long long>(blockIdx.x) * a.vocab / slices);
  const int end = static_cast<int>(static_cast<long long>(blockIdx.x + 1) * a.vocab / slices);
  const float* row = a.logits + r * a.row_stride;
  Best acc[kLanes];
  scan(row, begin, end, acc);
  const Best t = block_best(acc);
  if (threadIdx.x != 0) return;
  Best* mine = partials + static_cast<int64_t>(blockIdx.y) * slices;
  mine[blockIdx.x] = t;
  __threadfence(); // the partial before the ticket
  if (atomicInc(&tickets[blockIdx.y], static_cast<unsigned>(slices - 1)) != static_cast<unsigned>(slices - 1)) return;
  __threadfence(); // the other slices' partials after their tickets
  Best m = Best{-INFINITY, 0x7fffffff, 0.f, 0};
  for (int s = 0; s < slices; ++s) { // slice order: deterministic
    const Best p{__ldcg(&mine[s].max), __ldcg(&mine[s].idx), __ldcg(&mine[s].sum), __ldcg(&mine[s].nan)};
    m = merge(m, p);
  }
  store(a, r, m);
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

// block_per_row: one CTA per row.
int32_t supports(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0; }

int32_t launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  ninfer_argmax_args a = *static_cast<const ninfer_argmax_args*>(args);
  int64_t first = l->token_begin;
  void* params[] = {&a, &first};
  const cudaError_t rc = launch_kernel(reinterpret_cast<const void*>(ninfer_argmax_rows),
                                          dim3(static_cast<unsigned>(l->token_end - l->token_begin)), dim3(l->block),
                                          params, 0, static_cast<cudaStream_t>(stream));
  if (rc != cudaSuccess) {
    std::snprintf(err, err_len, "argmax: %lld rows of %d: %s", static_cast<long long>(l->token_end - first), a.vocab,
                  cudaGetErrorString(rc));
    return NINFER_ERR_LAUNCH;
  }
  return NINFER_OK;
}

// row_split: a CTA per slice, the slices' partials in the workspace, a ticket per row.
int32_t split_supports(const void*, const ninfer_shape* s) {
  return s->tokens > 0 && s->tokens <= NINFER_LAUNCH_TICKETS && s->dims[0] > 0;
}

// The slices' partials of `rows` rows.
size_t split_partial_bytes(int64_t rows, long long vocab) {
  return static_cast<size_t>(rows) * static_cast<size_t>(slices_for(vocab)) * sizeof(Best);
}

size_t split_workspace(const void*, const ninfer_shape* s, int64_t tokens_in_launch) {
  return split_partial_bytes(tokens_in_launch > 0 ? tokens_in_launch : s->tokens, s->dims[0]);
}

int32_t split_launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  ninfer_argmax_args a = *static_cast<const ninfer_argmax_args*>(args);
  int64_t first = l->token_begin;
  const int64_t rows = l->token_end - first;
  const int slices = slices_for(a.vocab);
  const char* why = nullptr;
  if (rows < 1 || rows > NINFER_LAUNCH_TICKETS) why = "takes 1 to NINFER_LAUNCH_TICKETS rows per launch";
  else if (!l->tickets) why = "needs the backend's launch tickets (ninfer_launch.tickets)";
  else if (!l->workspace || l->workspace_bytes < split_partial_bytes(rows, a.vocab))
    why = "workspace too small for the slices' partials";
  if (why) {
    std::snprintf(err, err_len, "argmax/row_split: %s", why);
    return NINFER_ERR_INVALID_ARGUMENT;
  }
  Best* partials = static_cast<Best*>(l->workspace);
  unsigned* tickets = l->tickets;
  void* params[] = {&a, &first, &partials, &tickets};
  const cudaError_t rc =
      launch_kernel(reinterpret_cast<const void*>(ninfer_argmax_split),
                    dim3(static_cast<unsigned>(slices), static_cast<unsigned>(rows)), dim3(kSplitThreads), params, 0,
                    static_cast<cudaStream_t>(stream));
  if (rc != cudaSuccess) {
    std::snprintf(err, err_len, "argmax/row_split: %lld rows of %d: %s", static_cast<long long>(rows), a.vocab,
                  cudaGetErrorString(rc));
    return NINFER_ERR_LAUNCH;
  }
  return NINFER_OK;
}

// The two variants; every field of a variant but these is the same for both.
struct ArgmaxForm {
  const void* kernel;
  const char* symbol;
  const char* name;
  int threads;
  int32_t (*supports)(const void*, const ninfer_shape*);
  size_t (*workspace)(const void*, const ninfer_shape*, int64_t);
  decltype(ninfer_variant::launch) launch;
};

const ArgmaxForm kForms[] = {
    {reinterpret_cast<const void*>(ninfer_argmax_rows), "ninfer_argmax_rows", "block_per_row", kThreads, supports,
     nullptr, launch},
    {reinterpret_cast<const void*>(ninfer_argmax_split), "ninfer_argmax_split", "row_split", kSplitThreads,
     split_supports, split_workspace, split_launch},
};

template <int F>
int32_t query(const void*, ninfer_kernel_resources* out, char* err, size_t err_len) {
  return query_kernel_attributes(kForms[F].kernel, kForms[F].symbol, kForms[F].threads, out, err, err_len);
}

template <int F>
int32_t driver_blocks(const void*, size_t dyn, int32_t* blocks, char* err, size_t err_len) {
  return query_driver_blocks(kForms[F].kernel, kForms[F].threads, dyn, blocks, err, err_len);
}

template <int F>
int32_t add(const ninfer_registrar* r, char* err, size_t err_len) {
  static ninfer_variant v{};
  const ArgmaxForm& d = kForms[F];
  const BuildResource* res = find_build_resource(d.symbol);
  if (!res) {
    std::snprintf(err, err_len, "argmax/%s: kernel missing from the build resource table", d.name);
    return NINFER_ERR_UNSUPPORTED;
  }
  v.op = NINFER_OP_ARGMAX;
  v.name = d.name;
  v.exec = NINFER_EXEC_CUDA;
  v.geometry = NINFER_GEOMETRY_TOKEN_TILED; // block_per_row: grid (rows); row_split: (slices, rows); not cooperative
  v.split_k = 1;
  v.tokens_per_cta = 1;
  v.dtype_mask = 1u << NINFER_DTYPE_F32;
  v.resources = make_resources(*res, d.threads);
  v.supports = d.supports;
  v.workspace_bytes = d.workspace;
  v.launch = d.launch;
  v.query_loaded_resources = query<F>;
  v.query_driver_blocks_per_sm = driver_blocks<F>;
  return r->add_variant(r->ctx, &v);
}

} // namespace

int32_t register_argmax(const ninfer_registrar* r, char* err, size_t err_len) {
  if (int32_t rc = add<0>(r, err, err_len); rc != NINFER_OK) return rc;
  return add<1>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
