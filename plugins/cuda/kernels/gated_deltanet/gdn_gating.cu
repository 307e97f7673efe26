// gdn_gating kernels (contract: ninfer/abi/ops/gdn_gating.h).
//
// One CTA computes a tile of `TPC` tokens against all 2*heads weight rows (w_a rows then
// w_b rows) over one slice of the hidden dimension. The unsplit variant reduces the whole
// hidden dimension in one CTA and applies the gating epilogue itself; it is a grid-stride
// kernel, so any grid size is legal. Split-K variants cut the hidden dimension into SPLIT
// slices (grid.y), park partial sums in the caller's workspace and meet at a grid-wide
// barrier before the epilogue: they are cooperative, so every CTA of a launch must be
// resident at once. The per-head variant (decode) gives each CTA one head of a token tile:
// both dot products over the whole hidden size, every load of the head's weights in flight at
// once, no workspace and no barrier. The planner, not this file, decides how many CTAs a
// launch may have; the built-in schedule tables send decode (1-8 tokens) to per_head and
// prompts (65+ tokens) to the tensor-core variant `mma` (gated_deltanet/gdn_gating_mma.cu,
// registered at the end of register_gdn_gating). The gating epilogue all of them share is
// gated_deltanet/gdn_gating_common.cuh.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "gated_deltanet/gdn_gating_common.cuh"
#include "common/grid_dependency.cuh"
#include "ninfer/abi/ops/gdn_gating.h"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include <cstdio>
#include <utility>

#include "../build_resources.hpp"
#include "../../cuda_variant.hpp"
#endif

namespace cg = cooperative_groups;

namespace ninfer::cuda_plugin {
namespace {

__host__ __device__ constexpr int slice_len(int hidden, int split) {
  // Slices are multiples of 8 elements so a later vectorised load stays aligned.
  return ((hidden + split - 1) / split + 7) / 8 * 8;
}

template <typename T, int SPLIT, int TPC>
__device__ void tile_partials(const ninfer_gdn_gating_args& a, int64_t t0, int nt, int k0,
                              int k1, T* xs, float* out, int64_t out_stride_t) {
  // Stage the token tile's slice of x in shared memory; rows past nt are zero so the inner
  // loop needs no token bound.
  const int klen = k1 - k0;
  for (int i = threadIdx.x; i < TPC * klen; i += blockDim.x) {
    const int tt = i / klen, k = i % klen;
    xs[tt * klen + k] = tt < nt ? static_cast<const T*>(a.x)[(t0 + tt) * a.x_row_stride + k0 + k]
                                : T(0.f);
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int rows = 2 * a.heads;
  for (int r = warp; r < rows; r += warps) {
    const T* w = static_cast<const T*>(r < a.heads ? a.w_a : a.w_b) +
                 static_cast<int64_t>(r < a.heads ? r : r - a.heads) * a.hidden;
    float acc[TPC];
#pragma unroll
    for (int i = 0; i < TPC; ++i) acc[i] = 0.f;
    for (int k = lane; k < klen; k += 32) {
      const float wv = to_float(w[k0 + k]);
#pragma unroll
      for (int i = 0; i < TPC; ++i) acc[i] += wv * to_float(xs[i * klen + k]);
    }
#pragma unroll
    for (int i = 0; i < TPC; ++i) {
      float v = acc[i];
      for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
      if (lane == 0 && i < nt) out[i * out_stride_t + r] = v;
    }
  }
  __syncthreads(); // xs and out are reused by the next tile
}

// Unsplit: grid-stride over token tiles, epilogue in the CTA. Dynamic smem: x tile, then
// TPC x 2*heads float results.
template <typename T, int TPC>
__device__ void gating_unsplit(const ninfer_gdn_gating_args& a, int64_t tok_begin,
                               int64_t tok_end) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int klen = slice_len(a.hidden, 1);
  T* xs = reinterpret_cast<T*>(smem);
  float* res = reinterpret_cast<float*>(smem + ((TPC * klen * sizeof(T) + 15) / 16) * 16);
  const int64_t tiles = (tok_end - tok_begin + TPC - 1) / TPC;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t t0 = tok_begin + tile * TPC;
    const int nt = static_cast<int>((tok_end - t0 < TPC ? tok_end - t0 : int64_t{TPC}));
    tile_partials<T, 1, TPC>(a, t0, nt, 0, a.hidden, xs, res, 2 * a.heads);
    for (int i = threadIdx.x; i < nt * a.heads; i += blockDim.x) {
      const int tt = i / a.heads, h = i % a.heads;
      write_gates(a, t0 + tt, h, res[tt * 2 * a.heads + h], res[tt * 2 * a.heads + a.heads + h]);
    }
    __syncthreads();
  }
}

// Split-K: grid = (token tiles of this launch, SPLIT). Workspace: SPLIT x launch tokens x
// 2*heads floats.
template <typename T, int SPLIT, int TPC>
__device__ void gating_split(const ninfer_gdn_gating_args& a, int64_t tok_begin, int64_t tok_end,
                             float* ws) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* xs = reinterpret_cast<T*>(smem);
  const int klen = slice_len(a.hidden, SPLIT);
  const int rows = 2 * a.heads;
  const int64_t launch_tokens = tok_end - tok_begin;
  const int64_t t0 = tok_begin + static_cast<int64_t>(blockIdx.x) * TPC;
  const int nt = static_cast<int>((tok_end - t0 < TPC ? tok_end - t0 : int64_t{TPC}));
  const int s = blockIdx.y;
  const int k0 = min(a.hidden, s * klen), k1 = min(a.hidden, k0 + klen);
  if (nt > 0 && k1 > k0)
    tile_partials<T, SPLIT, TPC>(a, t0, nt, k0, k1, xs, ws + (s * launch_tokens + (t0 - tok_begin)) * rows,
                                 rows);
  else if (nt > 0)
    for (int i = threadIdx.x; i < nt * rows; i += blockDim.x)
      ws[(s * launch_tokens + (t0 - tok_begin)) * rows + i] = 0.f; // empty slice (tiny hidden)
  cg::this_grid().sync();
  const int64_t outputs = launch_tokens * a.heads;
  const int64_t nthreads = static_cast<int64_t>(gridDim.x) * gridDim.y * blockDim.x;
  const int64_t first = (static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t o = first; o < outputs; o += nthreads) {
    const int64_t tt = o / a.heads;
    const int h = static_cast<int>(o % a.heads);
    float av = 0.f, bv = 0.f;
#pragma unroll
    for (int p = 0; p < SPLIT; ++p) {
      av += ws[(p * launch_tokens + tt) * rows + h];
      bv += ws[(p * launch_tokens + tt) * rows + a.heads + h];
    }
    write_gates(a, tok_begin + tt, h, av, bv);
  }
}

constexpr int kPerHeadThreads = 256;

// Per head: grid = (token tiles, head slots); a CTA takes heads blockIdx.y, + gridDim.y, ...
// Each thread strides the hidden size; the unrolled loop keeps 8 iterations of w_a, w_b and x
// loads in flight, so a 5,120-wide row costs about three memory latencies, not one per row
// of a warp's share as in tile_partials (which made decode split8 take 50 us on the H200).
template <typename T, int TPC>
__device__ void gating_per_head(const ninfer_gdn_gating_args& a, int64_t tok_begin, int64_t tok_end) {
  constexpr int kWarps = kPerHeadThreads / 32;
  __shared__ float red[2 * TPC][kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const T* x = static_cast<const T*>(a.x);
  const int64_t tiles = (tok_end - tok_begin + TPC - 1) / TPC;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t t0 = tok_begin + tile * TPC;
    const int nt = static_cast<int>((tok_end - t0 < TPC ? tok_end - t0 : int64_t{TPC}));
    for (int h = blockIdx.y; h < a.heads; h += gridDim.y) {
      const T* wa = static_cast<const T*>(a.w_a) + static_cast<int64_t>(h) * a.hidden;
      const T* wb = static_cast<const T*>(a.w_b) + static_cast<int64_t>(h) * a.hidden;
      float acc[2 * TPC];
#pragma unroll
      for (int i = 0; i < 2 * TPC; ++i) acc[i] = 0.f;
#pragma unroll 8
      for (int k = threadIdx.x; k < a.hidden; k += kPerHeadThreads) {
        const float va = to_float(wa[k]), vb = to_float(wb[k]);
#pragma unroll
        for (int i = 0; i < TPC; ++i) {
          const float xv = i < nt ? to_float(x[(t0 + i) * a.x_row_stride + k]) : 0.f;
          acc[i] += va * xv;
          acc[TPC + i] += vb * xv;
        }
      }
#pragma unroll
      for (int i = 0; i < 2 * TPC; ++i) {
        float v = acc[i];
        for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
        if (lane == 0) red[i][warp] = v;
      }
      __syncthreads();
      if (threadIdx.x < nt) {
        const int i = threadIdx.x;
        float av = 0.f, bv = 0.f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) av += red[i][w], bv += red[TPC + i][w];
        write_gates(a, t0 + i, h, av, bv);
      }
      __syncthreads(); // red is reused by the next head
    }
  }
}

} // namespace
} // namespace ninfer::cuda_plugin

using ninfer::cuda_plugin::gating_per_head;
using ninfer::cuda_plugin::gating_split;
using ninfer::cuda_plugin::gating_unsplit;

// Kernel entry points: extern "C" so their cubin names are the variant symbols the build-time
// resource table is keyed by. Block sizes are fixed per variant (the launch bounds).
#define NINFER_GATING_UNSPLIT(NAME, T, THREADS, TPC)                                            \
  extern "C" __global__ void __launch_bounds__(THREADS)                                          \
      NAME(ninfer_gdn_gating_args a, int64_t b, int64_t e, float*) {                             \
    ninfer::cuda_plugin::grid_dependency_prologue(); \
    gating_unsplit<T, TPC>(a, b, e);                                                             \
  }
#define NINFER_GATING_SPLIT(NAME, T, THREADS, SPLIT, TPC)                                       \
  extern "C" __global__ void __launch_bounds__(THREADS)                                          \
      NAME(ninfer_gdn_gating_args a, int64_t b, int64_t e, float* ws) {                          \
    ninfer::cuda_plugin::grid_dependency_prologue(); \
    gating_split<T, SPLIT, TPC>(a, b, e, ws);                                                    \
  }

NINFER_GATING_UNSPLIT(ninfer_gdn_gating_unsplit_f32, float, 256, 4)
NINFER_GATING_UNSPLIT(ninfer_gdn_gating_unsplit_bf16, __nv_bfloat16, 256, 4)
NINFER_GATING_SPLIT(ninfer_gdn_gating_split2_f32, float, 512, 2, 8)
NINFER_GATING_SPLIT(ninfer_gdn_gating_split2_bf16, __nv_bfloat16, 512, 2, 8)
NINFER_GATING_SPLIT(ninfer_gdn_gating_split4_f32, float, 512, 4, 8)
NINFER_GATING_SPLIT(ninfer_gdn_gating_split4_bf16, __nv_bfloat16, 512, 4, 8)
NINFER_GATING_SPLIT(ninfer_gdn_gating_split8_f32, float, 128, 8, 2)
NINFER_GATING_SPLIT(ninfer_gdn_gating_split8_bf16, __nv_bfloat16, 128, 8, 2)
#define NINFER_GATING_PER_HEAD(NAME, T, TPC)                                                    \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kPerHeadThreads)             \
      NAME(ninfer_gdn_gating_args a, int64_t b, int64_t e, float*) {                             \
    ninfer::cuda_plugin::grid_dependency_prologue();                                             \
    gating_per_head<T, TPC>(a, b, e);                                                            \
  }
NINFER_GATING_PER_HEAD(ninfer_gdn_gating_per_head_f32, float, 4)
NINFER_GATING_PER_HEAD(ninfer_gdn_gating_per_head_bf16, __nv_bfloat16, 4)

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

using GatingKernel = void (*)(ninfer_gdn_gating_args, int64_t, int64_t, float*);

// How a variant's kernel divides the work (and so what shared memory and workspace it needs).
enum class Form { Unsplit, Split, PerHead };

struct GatingVariantDef {
  const char* name;
  int split; // grid.y: hidden slices (Split) or head slots (PerHead)
  int tpc;
  int threads;
  Form form;
  const char* symbol_f32;
  const char* symbol_bf16;
  GatingKernel kernel_f32;
  GatingKernel kernel_bf16;
};

constexpr int kVariants = 5;
const GatingVariantDef kDefs[kVariants] = {
    {"unsplit", 1, 4, 256, Form::Unsplit, "ninfer_gdn_gating_unsplit_f32", "ninfer_gdn_gating_unsplit_bf16",
     ninfer_gdn_gating_unsplit_f32, ninfer_gdn_gating_unsplit_bf16},
    {"split2", 2, 8, 512, Form::Split, "ninfer_gdn_gating_split2_f32", "ninfer_gdn_gating_split2_bf16",
     ninfer_gdn_gating_split2_f32, ninfer_gdn_gating_split2_bf16},
    {"split4", 4, 8, 512, Form::Split, "ninfer_gdn_gating_split4_f32", "ninfer_gdn_gating_split4_bf16",
     ninfer_gdn_gating_split4_f32, ninfer_gdn_gating_split4_bf16},
    {"split8", 8, 2, 128, Form::Split, "ninfer_gdn_gating_split8_f32", "ninfer_gdn_gating_split8_bf16",
     ninfer_gdn_gating_split8_f32, ninfer_gdn_gating_split8_bf16},
    // 64 head slots: one CTA per head for models of up to 64 value heads (Qwen3.5-27B: 48).
    {"per_head", 64, 4, ninfer::cuda_plugin::kPerHeadThreads, Form::PerHead, "ninfer_gdn_gating_per_head_f32",
     "ninfer_gdn_gating_per_head_bf16", ninfer_gdn_gating_per_head_f32, ninfer_gdn_gating_per_head_bf16},
};

size_t elem_size(int32_t dtype) { return dtype == NINFER_DTYPE_F32 ? 4 : 2; }

template <int V>
size_t dyn_smem(const void*, const ninfer_shape* s) {
  const GatingVariantDef& d = kDefs[V];
  if (d.form == Form::PerHead) return 0;
  const size_t klen = slice_len(static_cast<int>(s->dims[0]), d.split);
  size_t bytes = d.tpc * klen * elem_size(s->dtype);
  if (d.split == 1) bytes = (bytes + 15) / 16 * 16 + d.tpc * 2 * s->dims[1] * sizeof(float);
  return bytes;
}

template <int V>
size_t workspace(const void*, const ninfer_shape* s, int64_t launch_tokens) {
  const GatingVariantDef& d = kDefs[V];
  return d.form != Form::Split ? 0 : d.split * launch_tokens * 2 * s->dims[1] * sizeof(float);
}

int32_t supports(const void*, const ninfer_shape* s) {
  return (s->dtype == NINFER_DTYPE_F32 || s->dtype == NINFER_DTYPE_BF16) && s->dims[0] > 0 &&
         s->dims[1] > 0 && s->tokens > 0;
}

// per_head re-reads a head's weights for every tile of 4 tokens: right for decode, wasteful for
// a prompt, so it declines long calls (and the planner's own route never meets it there).
constexpr int64_t kPerHeadMaxTokens = 64;
int32_t supports_per_head(const void*, const ninfer_shape* s) { return supports(nullptr, s) && s->tokens <= kPerHeadMaxTokens; }

template <int V>
int32_t launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  const GatingVariantDef& d = kDefs[V];
  ninfer_gdn_gating_args a = *static_cast<const ninfer_gdn_gating_args*>(args);
  GatingKernel k = a.dtype == NINFER_DTYPE_F32 ? d.kernel_f32 : d.kernel_bf16;
  int64_t b = l->token_begin, e = l->token_end;
  float* ws = static_cast<float*>(l->workspace);
  cudaError_t rc = set_max_dynamic_smem(reinterpret_cast<const void*>(k), l->dynamic_smem_bytes);
  if (rc == cudaSuccess) {
    void* params[] = {&a, &b, &e, &ws};
    dim3 grid(l->grid_x, l->grid_y), block(l->block);
    auto s = static_cast<cudaStream_t>(stream);
    rc = launch_kernel(reinterpret_cast<const void*>(k), grid, block, params, l->dynamic_smem_bytes, s,
                       l->cooperative != 0);
  }
  if (rc != cudaSuccess) {
    std::snprintf(err, err_len, "gdn_gating/%s: launch grid (%d,%d) block %d smem %zu tokens [%lld,%lld): %s",
                  d.name, l->grid_x, l->grid_y, l->block, l->dynamic_smem_bytes,
                  static_cast<long long>(b), static_cast<long long>(e), cudaGetErrorString(rc));
    return NINFER_ERR_LAUNCH;
  }
  return NINFER_OK;
}

// The kernel (of the two dtypes) whose resources the variant reports; set at registration.
GatingKernel g_planned_kernel[kVariants];

template <int V>
int32_t query(const void*, ninfer_kernel_resources* out, char* err, size_t err_len) {
  const bool f32 = g_planned_kernel[V] == kDefs[V].kernel_f32;
  return query_kernel_attributes(reinterpret_cast<const void*>(g_planned_kernel[V]),
                                 f32 ? kDefs[V].symbol_f32 : kDefs[V].symbol_bf16,
                                 kDefs[V].threads, out, err, err_len);
}

template <int V>
int32_t driver_blocks(const void*, size_t dyn, int32_t* blocks, char* err, size_t err_len) {
  return query_driver_blocks(reinterpret_cast<const void*>(g_planned_kernel[V]), kDefs[V].threads, dyn, blocks, err,
                             err_len);
}

template <int V>
void fill(ninfer_variant& v) {
  const GatingVariantDef& d = kDefs[V];
  v.op = NINFER_OP_GDN_GATING;
  v.name = d.name;
  v.exec = NINFER_EXEC_CUDA;
  const bool cooperative = d.form == Form::Split;
  v.geometry = cooperative ? NINFER_GEOMETRY_TOKEN_TILED : NINFER_GEOMETRY_TOKEN_TILED_GRID_STRIDE;
  v.cooperative = cooperative;
  v.split_k = d.split;
  v.tokens_per_cta = d.tpc;
  v.dtype_mask = (1u << NINFER_DTYPE_F32) | (1u << NINFER_DTYPE_BF16);
  v.dynamic_smem_bytes = dyn_smem<V>;
  v.workspace_bytes = workspace<V>;
  v.supports = d.form == Form::PerHead ? supports_per_head : supports;
  v.launch = launch<V>;
  v.query_loaded_resources = query<V>;
  v.query_driver_blocks_per_sm = driver_blocks<V>;
}

template <int... V>
void fill_all(ninfer_variant* out, std::integer_sequence<int, V...>) {
  (fill<V>(out[V]), ...);
}

} // namespace

int32_t register_gdn_gating(const ninfer_registrar* r, char* err, size_t err_len) {
  static ninfer_variant variants[kVariants];
  fill_all(variants, std::make_integer_sequence<int, kVariants>{});
  for (int i = 0; i < kVariants; ++i) {
    const GatingVariantDef& d = kDefs[i];
    const BuildResource* f32 = find_build_resource(d.symbol_f32);
    const BuildResource* bf16 = find_build_resource(d.symbol_bf16);
    if (!f32 || !bf16) {
      std::snprintf(err, err_len, "gdn_gating/%s: kernel missing from the build resource table", d.name);
      return NINFER_ERR_UNSUPPORTED;
    }
    // Both dtypes share block size and tiling; plan with the one needing more registers so a
    // plan is legal for either (their static shared memory is the same).
    const bool f32_worse = f32->registers >= bf16->registers;
    variants[i].resources = make_resources(f32_worse ? *f32 : *bf16, d.threads);
    g_planned_kernel[i] = f32_worse ? d.kernel_f32 : d.kernel_bf16;
    if (int32_t rc = r->add_variant(r->ctx, &variants[i]); rc != NINFER_OK) return rc;
  }
  return register_gdn_gating_mma(r, err, err_len); // the tensor-core variant, for prompts
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
