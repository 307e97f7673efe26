// argmax on the GPU (contract: ninfer/abi/ops/argmax.h): one CTA of 1024 threads per logits
// row; each thread keeps running (max, first index, sum of exp relative to max) triples over its
// strided elements, then warps and the block merge those triples. One pass over the row.
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

constexpr int kThreads = 1024;

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

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kThreads)
    ninfer_argmax_rows(ninfer_argmax_args a, int64_t first) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  const int64_t r = first + blockIdx.x;
  const float* row = a.logits + r * a.row_stride;
  Best acc[kLanes];
#pragma unroll
  for (int u = 0; u < kLanes; ++u) acc[u] = Best{-INFINITY, 0x7fffffff, 0.f, 0};
  const int step = static_cast<int>(blockDim.x);
  int j = threadIdx.x;
  for (; j + (kLanes - 1) * step < a.vocab; j += kLanes * step) {
    float x[kLanes];
#pragma unroll
    for (int u = 0; u < kLanes; ++u) x[u] = row[j + u * step];
#pragma unroll
    for (int u = 0; u < kLanes; ++u) take(acc[u], x[u], j + u * step);
  }
  for (; j < a.vocab; j += step) take(acc[0], row[j], j);
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
  if (threadIdx.x == 0) {
    Best t = warp_best[0];
    for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w) t = merge(t, warp_best[w]);
    const bool bad = t.nan || t.idx == 0x7fffffff;
    a.ids[r] = bad ? -1 : t.idx;
    if (a.logprob) a.logprob[r] = bad ? NAN : -logf(t.sum);
  }
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

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

int32_t query(const void*, ninfer_kernel_resources* out, char* err, size_t err_len) {
  return query_kernel_attributes(reinterpret_cast<const void*>(ninfer_argmax_rows), "ninfer_argmax_rows", kThreads,
                                 out, err, err_len);
}

int32_t driver_blocks(const void*, size_t dyn, int32_t* blocks, char* err, size_t err_len) {
  return query_driver_blocks(reinterpret_cast<const void*>(ninfer_argmax_rows), kThreads, dyn, blocks, err, err_len);
}

} // namespace

int32_t register_argmax(const ninfer_registrar* r, char* err, size_t err_len) {
  static ninfer_variant v{};
  const BuildResource* res = find_build_resource("ninfer_argmax_rows");
  if (!res) {
    std::snprintf(err, err_len, "argmax: kernel missing from the build resource table");
    return NINFER_ERR_UNSUPPORTED;
  }
  v.op = NINFER_OP_ARGMAX;
  v.name = "block_per_row";
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
#endif // __CUDACC_RTC__
