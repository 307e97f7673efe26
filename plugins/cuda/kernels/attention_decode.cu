// attention, split-KV decode form (contract: ninfer/abi/ops/attention.h).
//
// A decode token reads a long cache span with one query per head: too little work for one
// CTA per (token, head) to fill the card. Each token gets `splits` CTAs (grid.y = the
// variant's split_k); they divide the token's (kv head, key chunk) pairs among themselves:
// below the kv head count a CTA takes whole kv heads, from there on every kv head's keys are
// cut into splits / kv_heads chunks, one per CTA. A CTA's rows are the query heads of its kv
// head, so each K/V tile it loads serves the whole GQA group from shared memory.
//
// When keys are cut, each chunk leaves a partial result (running max, sum of weights,
// unnormalised output row) in the caller's workspace; after a grid-wide barrier every warp
// merges the partials of some (token, head) rows. The barrier makes the variants cooperative:
// the planner gives a call the largest split count whose tokens x splits CTAs are all resident
// on the device, so the split follows the device (SM count, registers, shared memory), never
// a constant. Which split counts may serve a shape (enough keys per chunk, a bounded
// workspace) is decided by decode_serves() in attention_shapes.hpp.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <utility>

#include "../cuda_variant.hpp"
#include "attention_host.hpp"
#include "attention_tile.cuh"
#include "grid_dependency.cuh"

namespace cg = cooperative_groups;

namespace ninfer::cuda_plugin::attention {
namespace {

constexpr int kRows = kDecodeMaxGroup;

// Partial result of (token tt of the launch, kv head g, chunk, row r of the group).
__device__ inline float* partial_at(float* ws, int64_t tt, int g, int chunk, int r, int kv_heads, int chunks,
                                    int group, int head_dim) {
  return ws + (((tt * kv_heads + g) * chunks + chunk) * group + r) * partial_floats(head_dim);
}

// Merges the chunks' partials of one (token, head) row into its output row: one warp.
template <int HD>
__device__ void merge_row(const ninfer_attention_args& a, float* ws, int64_t tb, int64_t tt, int h, int chunks,
                          int lane) {
  const ninfer_kv_cache& c = a.cache;
  const int group = a.heads / c.kv_heads, g = h / group, r = h % group, hd = c.head_dim;
  const int64_t chunk_stride = static_cast<int64_t>(group) * partial_floats(hd);
  const float* p0 = partial_at(ws, tt, g, 0, r, c.kv_heads, chunks, group, hd);
  // Partials were written by other CTAs before the barrier: read them through L2 (__ldcg).
  float m = -INFINITY;
  for (int ch = 0; ch < chunks; ++ch) {
    const float* p = p0 + ch * chunk_stride;
    if (__ldcg(p + 1) > 0.f) m = fmaxf(m, __ldcg(p));
  }
  constexpr int DPL = HD / 32;
  float total = 0.f, acc[DPL];
#pragma unroll
  for (int k = 0; k < DPL; ++k) acc[k] = 0.f;
  for (int ch = 0; ch < chunks; ++ch) {
    const float* p = p0 + ch * chunk_stride;
    const float l = __ldcg(p + 1);
    if (!(l > 0.f)) continue; // an empty chunk (past the token's position) holds no output row
    const float w = expf(__ldcg(p) - m);
    total += w * l;
#pragma unroll
    for (int k = 0; k < DPL; ++k) {
      const int d = lane + 32 * k;
      if (d < hd) acc[k] = fmaf(w, __ldcg(p + 2 + d), acc[k]);
    }
  }
  float* dst = a.out + (tb + tt) * a.out_token_stride + static_cast<int64_t>(h) * hd;
#pragma unroll
  for (int k = 0; k < DPL; ++k) {
    const int d = lane + 32 * k;
    if (d < hd) dst[d] = total > 0.f ? acc[k] / total : __int_as_float(0x7fc00000);
  }
}

template <int HD>
__device__ void decode_split(const ninfer_attention_args& a, int64_t tb, int64_t te, float* ws) {
  extern __shared__ __align__(16) unsigned char smem[];
  const Tiles<HD, kRows> tiles(smem);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const ninfer_kv_cache& c = a.cache;
  const int kvh = c.kv_heads, group = a.heads / kvh, hd = c.head_dim;
  const int splits = gridDim.y, split = blockIdx.y;
  const int chunks = chunks_per_head(splits, kvh);

  const int64_t tt = blockIdx.x, t = tb + tt; // tokens_per_cta = 1: grid.x covers [tb, te)
  const int seq = a.batch.token_seq[t], slot = a.batch.seq_slot[seq], pos = a.batch.token_pos[t];
  const bool ok = in_cache(c, slot, pos);
  const int span = ok ? pos + 1 : 0; // a token outside the cache sees no key: its rows become NaN
  const int chunk_len = (span + chunks - 1) / chunks;

  // This CTA's work: kv heads g0, g0 + gstep, ... (below kvh), each with key chunk `chunk`.
  int g0 = split, gstep = splits, chunk = 0;
  if (splits >= kvh) {
    g0 = split < kvh * chunks ? split / chunks : kvh; // CTAs past kvh * chunks have no work
    gstep = kvh;
    chunk = split % chunks;
  }
  const int k0 = min(span, chunk * chunk_len), k1 = min(span, k0 + chunk_len);

  // Rows are the group's query heads, spread over the warps: row warp + kDecodeWarps * i.
  int row[kRowsPerWarp], last[kRowsPerWarp];
  bool active[kRowsPerWarp];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    row[i] = warp + kDecodeWarps * i;
    active[i] = row[i] < group;
    last[i] = active[i] ? pos : -1;
  }

  for (int g = g0; g < kvh; g += gstep) {
    __syncthreads(); // every warp is done with the previous kv head's tiles
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const float* src =
          active[i] ? a.q + t * a.q_token_stride + static_cast<int64_t>(g * group + row[i]) * a.q_head_stride : nullptr;
      load_q_row<HD>(tiles.q + row[i] * HD, src, hd, a.scale, lane, 32);
    }
    RowState<HD> st;
    st.reset();
    const KvRows kv = kv_rows(c, ok ? slot : 0, g);
    for (int key0 = k0; key0 < k1; key0 += kKeysPerTile) {
      const int nkeys = k1 - key0 < kKeysPerTile ? k1 - key0 : kKeysPerTile;
      __syncthreads();
      load_kv_tile<HD, kRows, kDecodeThreads>(tiles, kv, key0, nkeys);
      __syncthreads();
      if (warp < group) attend_tile(st, tiles, row, last, key0, nkeys, lane);
    }
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      if (!active[i]) continue;
      const int h = g * group + row[i];
      if (chunks == 1) {
        store_row(st, i, a.out + t * a.out_token_stride + static_cast<int64_t>(h) * hd, hd, lane);
        continue;
      }
      float* p = partial_at(ws, tt, g, chunk, row[i], kvh, chunks, group, hd);
      const float total = st.total(i);
      if (lane == 0) {
        p[0] = st.m[i];
        p[1] = total;
      }
#pragma unroll
      for (int k = 0; k < RowState<HD>::kDimsPerLane; ++k) {
        const int d = lane + 32 * k;
        if (d < hd) p[2 + d] = st.acc[i][k];
      }
    }
  }
  if (chunks == 1) return; // the same for every CTA of the grid: no barrier needed

  cg::this_grid().sync();
  const int64_t rows = (te - tb) * a.heads;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * gridDim.y * kDecodeWarps;
  for (int64_t w = (static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x) * kDecodeWarps + warp; w < rows;
       w += warps)
    merge_row<HD>(a, ws, tb, w / a.heads, static_cast<int>(w % a.heads), chunks, lane);
}

} // namespace
} // namespace ninfer::cuda_plugin::attention

#define NINFER_ATTENTION_DECODE(HD)                                                                          \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::attention::kDecodeThreads)               \
      ninfer_attention_decode_hd##HD(ninfer_attention_args a, int64_t b, int64_t e, float* ws) {             \
    ninfer::cuda_plugin::grid_dependency_prologue(); \
    ninfer::cuda_plugin::attention::decode_split<HD>(a, b, e, ws);                                           \
  }
NINFER_ATTENTION_DECODE(64)
NINFER_ATTENTION_DECODE(128)
NINFER_ATTENTION_DECODE(256)

namespace ninfer::cuda_plugin::attention {
namespace {

struct DecodeKernel {
  int hd;
  const char* symbol;
  Kernel kernel;
};

const DecodeKernel kKernels[kHeadDimClassCount] = {
    {64, "ninfer_attention_decode_hd64", ninfer_attention_decode_hd64},
    {128, "ninfer_attention_decode_hd128", ninfer_attention_decode_hd128},
    {256, "ninfer_attention_decode_hd256", ninfer_attention_decode_hd256},
};

// Variant V: head-dim class V / kDecodeSplitCount, split count V % kDecodeSplitCount.
constexpr int kVariants = kHeadDimClassCount * kDecodeSplitCount;
constexpr const DecodeKernel& kernel_of(int v) { return kKernels[v / kDecodeSplitCount]; }
constexpr int split_of(int v) { return kDecodeSplits[v % kDecodeSplitCount]; }

char g_names[kVariants][32]; // "decode_split512_hd256"

template <int V>
size_t dyn_smem(const ninfer_shape*) {
  return smem_bytes(kernel_of(V).hd, kRows);
}

template <int V>
size_t workspace(const ninfer_shape* s, int64_t) {
  return workspace_bytes(*s);
}

template <int V>
int32_t supports(const ninfer_shape* s) {
  return basic_shape_ok(*s, kernel_of(V).hd) && decode_serves(*s, split_of(V));
}

template <int V>
int32_t launch(const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  const auto& a = *static_cast<const ninfer_attention_args*>(args);
  const char* name = g_names[V];
  if (int32_t rc = check_args(a, *l, kernel_of(V).hd, name, err, err_len); rc != NINFER_OK) return rc;
  const int64_t tokens = l->token_end - l->token_begin;
  const int group = a.heads / a.cache.kv_heads;
  const int chunks = chunks_per_head(l->grid_y, a.cache.kv_heads);
  const size_t need = static_cast<size_t>(tokens * a.cache.kv_heads * chunks * group *
                                          partial_floats(a.cache.head_dim)) * sizeof(float);
  const char* problem = nullptr;
  if (l->grid_x != tokens || l->grid_y < 1) problem = "grid.x must equal the launch's tokens (one CTA per token)";
  else if (group > kDecodeMaxGroup) problem = "more query heads per kv head than the decode kernel has rows";
  else if (chunks > 1 && !l->cooperative) problem = "split keys need a cooperative launch (grid barrier)";
  else if (chunks > 1 && (!l->workspace || l->workspace_bytes < need)) problem = "workspace too small for the partials";
  if (problem) {
    std::snprintf(err, err_len, "attention/%s: %s (grid %d x %d, %lld tokens, %d heads / %d kv heads, workspace %zu of "
                  "%zu B)", name, problem, l->grid_x, l->grid_y, static_cast<long long>(tokens), a.heads,
                  a.cache.kv_heads, l->workspace_bytes, need);
    return NINFER_ERR_INVALID_ARGUMENT;
  }
  return launch_kernel(kernel_of(V).kernel, dim3(l->grid_x, l->grid_y), kDecodeThreads, a, *l, l->cooperative != 0,
                       stream, name, err, err_len);
}

template <int V>
int32_t query(ninfer_kernel_resources* out, char* err, size_t err_len) {
  return query_kernel_attributes(reinterpret_cast<const void*>(kernel_of(V).kernel), kernel_of(V).symbol,
                                 kDecodeThreads, out, err, err_len);
}

template <int V>
int32_t driver_blocks(size_t dyn, int32_t* blocks, char* err, size_t err_len) {
  return query_driver_blocks(reinterpret_cast<const void*>(kernel_of(V).kernel), kDecodeThreads, dyn, blocks, err,
                             err_len);
}

template <int V>
void fill(ninfer_variant& v) {
  std::snprintf(g_names[V], sizeof g_names[V], "decode_split%d_hd%d", split_of(V), kernel_of(V).hd);
  v.op = NINFER_OP_ATTENTION;
  v.name = g_names[V];
  v.exec = NINFER_EXEC_CUDA;
  v.geometry = NINFER_GEOMETRY_TOKEN_TILED;
  v.cooperative = 1;
  v.split_k = split_of(V);
  v.tokens_per_cta = 1;
  v.dtype_mask = 1u << NINFER_DTYPE_F32;
  v.dynamic_smem_bytes = dyn_smem<V>;
  v.workspace_bytes = workspace<V>;
  v.supports = supports<V>;
  v.launch = launch<V>;
  v.query_loaded_resources = query<V>;
  v.query_driver_blocks_per_sm = driver_blocks<V>;
}

template <int... V>
void fill_all(ninfer_variant* out, std::integer_sequence<int, V...>) {
  (fill<V>(out[V]), ...);
}

} // namespace

int32_t register_attention_decode(const ninfer_registrar* r, char* err, size_t err_len) {
  static ninfer_variant variants[kVariants];
  fill_all(variants, std::make_integer_sequence<int, kVariants>{});
  for (int i = 0; i < kVariants; ++i) {
    const BuildResource* res = find_build_resource(kernel_of(i).symbol);
    if (!res) {
      std::snprintf(err, err_len, "attention/%s: kernel %s missing from the build resource table", g_names[i],
                    kernel_of(i).symbol);
      return NINFER_ERR_UNSUPPORTED;
    }
    variants[i].resources = make_resources(*res, kDecodeThreads);
    if (int32_t rc = r->add_variant(r->ctx, &variants[i]); rc != NINFER_OK) return rc;
  }
  return NINFER_OK;
}

} // namespace ninfer::cuda_plugin::attention
