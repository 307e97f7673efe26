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
// unnormalised output row) in the caller's workspace and takes a ticket of its (token, kv
// head); the chunk that takes the last one merges that kv head's rows (g_merge_tickets). The
// variants are declared cooperative so that the planner gives a call the largest split count
// whose tokens x splits CTAs are all resident on the device in one wave: the split follows the
// device (SM count, registers, shared memory), never a constant. The launch itself is ordinary
// (no grid barrier), so it starts early behind the previous kernel. Which split counts may serve
// a shape (enough keys per chunk, a bounded workspace) is decided by decode_serves() in
// attention_shapes.hpp.
//
// The cache may be float32, float16 or bfloat16 (one kernel per cache dtype, the variant
// launches the call's). Decode at long context is bound by the cache's bytes: a 16-bit cache
// halves them, is read in 16-byte vectors (8 elements) and widened to the same float32 tiles,
// and its next K/V tile is fetched into registers before the CTA computes on the current one,
// so that tile's memory latency hides behind the computation (KvTileInFlight). The float32
// cache keeps the single-buffered loop: its tile in registers would cost twice as many (32 at
// hd128 with 256 threads) inside the 128-register bound that keeps two CTAs per SM.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "attention_tile.cuh"
#include "grid_dependency.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include <cstdio>
#include <utility>

#include "../cuda_variant.hpp"
#include "attention_host.hpp"
#endif

namespace ninfer::cuda_plugin::attention {
namespace {

constexpr int kRows = kDecodeMaxGroup;

// Partial result of (token tt of the launch, kv head g, chunk, row r of the group).
template <class F> // float or const float
__device__ inline F* partial_at(F* ws, int64_t tt, int g, int chunk, int r, int kv_heads, int chunks,
                                    int group, int head_dim) {
  return ws + (((tt * kv_heads + g) * chunks + chunk) * group + r) * partial_floats(head_dim);
}

// Merges the chunks' partials of one (token, head) row into its output row: one warp. Lanes take
// chunks for the maxima and weights (one L2 round trip for up to 32 chunks, not one per chunk);
// then every lane adds its output dims over the chunks, the chunk's weight broadcast from the
// lane that computed it, loads unrolled so several chunks' rows are in flight at once. An empty
// chunk (past the token's position) has weight 0 and a zero row, so it needs no branch.
template <int HD>
__device__ void merge_row(const ninfer_attention_args& a, const float* ws, int64_t tb, int64_t tt, int h, int chunks,
                          int lane) {
  const ninfer_kv_cache& c = a.cache;
  const int group = a.heads / c.kv_heads, g = h / group, r = h % group, hd = c.head_dim;
  const int64_t chunk_stride = static_cast<int64_t>(group) * partial_floats(hd);
  const float* p0 = partial_at(ws, tt, g, 0, r, c.kv_heads, chunks, group, hd);
  // Partials were written by other CTAs: read them through L2 (__ldcg), never a stale L1 line.
  float m = -INFINITY;
  for (int ch = lane; ch < chunks; ch += 32)
    if (__ldcg(p0 + ch * chunk_stride + 1) > 0.f) m = fmaxf(m, __ldcg(p0 + ch * chunk_stride));
  m = warp_max(m);
  constexpr int DPL = HD / 32;
  float total = 0.f, acc[DPL];
#pragma unroll
  for (int k = 0; k < DPL; ++k) acc[k] = 0.f;
  for (int base = 0; base < chunks; base += 32) {
    const float* mine = p0 + (base + lane) * chunk_stride;
    const float l = base + lane < chunks ? __ldcg(mine + 1) : 0.f;
    const float w = l > 0.f ? expf(__ldcg(mine) - m) : 0.f;
    total += w * l;
    const int n = min(32, chunks - base);
#pragma unroll 4
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

// One ticket per (token of the launch, kv head) whose keys are cut into chunks: the chunk CTAs
// take it in turn (atomicInc wraps at chunks - 1), and the one that takes it last merges the
// rows. atomicInc's wrap returns the ticket to 0 after exactly `chunks` takes, so every launch
// finds them at 0 (module globals start at 0) without a reset of its own. They replace a
// cooperative grid barrier: the launch is an ordinary one that starts early behind the previous
// kernel (programmatic dependent launch), and each kv head's merge starts as soon as its own
// chunks are done. Launches on one device share the tickets, so two split-key decode launches
// must not run at the same time (ninfer runs a model's steps on one stream).
__device__ unsigned int g_merge_tickets[kDecodeMaxPartials];

// Key chunks per kv head for this launch: the planned count, cut down to what the launch's
// longest span fills with kMinChunkKeys keys per chunk (the planner's own rule, decode_serves,
// applied to the keys the tokens have now rather than to the planned context). A graph replays
// one plan at every position, so early in a sequence the keys are few: one chunk then means no
// partials, no grid barrier and no merge (~3 us of a 10 us launch at a handful of keys). Every
// CTA computes the same value from the batch metadata, so the barrier is taken by all or none.
__device__ int run_chunks(const ninfer_attention_args& a, int64_t tb, int64_t te, int planned) {
  if (planned == 1) return 1;
  int longest = 0;
  for (int64_t t = tb; t < te; ++t) {
    const int seq = a.batch.token_seq[t], slot = a.batch.seq_slot[seq], pos = a.batch.token_pos[t];
    if (in_cache(a.cache, slot, pos)) longest = max(longest, pos + 1);
  }
  return max(1, min(planned, longest / static_cast<int>(kMinChunkKeys)));
}

// Keys [k0, k1) of one kv head through the rows' online softmax (st), tile by tile. The caller's
// q rows must be in the q tile, visible after the first barrier here.
template <class E, int HD, int R>
__device__ void decode_keys(RowState<HD, R>& st, const Tiles<HD, kRows>& tiles, const KvRows<E>& kv, int k0, int k1,
                            const int (&row)[R], const int (&last)[R], int group) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if constexpr (sizeof(E) == 2) {
    if (kv.vec) { // pipelined: tile n + 1 is in flight while tile n is computed
      KvTileInFlight<E, HD, kDecodeThreads> next;
      if (k0 < k1) next.fetch(kv, k0, min(k1 - k0, kKeysPerTile));
      for (int key0 = k0; key0 < k1; key0 += kKeysPerTile) {
        const int nkeys = min(k1 - key0, kKeysPerTile);
        __syncthreads(); // every warp is done with the previous tile
        next.store(tiles);
        __syncthreads();
        if (key0 + kKeysPerTile < k1) next.fetch(kv, key0 + kKeysPerTile, min(k1 - key0 - kKeysPerTile, kKeysPerTile));
        if (warp < group) attend_tile(st, tiles, row, last, key0, nkeys, lane);
      }
      return;
    }
  }
  for (int key0 = k0; key0 < k1; key0 += kKeysPerTile) {
    const int nkeys = min(k1 - key0, kKeysPerTile);
    __syncthreads();
    load_kv_tile<E, HD, kRows, kDecodeThreads>(tiles, kv, key0, nkeys);
    __syncthreads();
    if (warp < group) attend_tile(st, tiles, row, last, key0, nkeys, lane);
  }
}

// R: rows per warp, the fewest that hold the GQA group (group <= kDecodeWarps * R).
template <class E, int HD, int R>
__device__ void decode_split(const ninfer_attention_args& a, int64_t tb, int64_t te, float* ws) {
  extern __shared__ __align__(16) unsigned char smem[];
  const Tiles<HD, kRows> tiles(smem);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const ninfer_kv_cache& c = a.cache;
  const int kvh = c.kv_heads, group = a.heads / kvh, hd = c.head_dim;
  const int splits = gridDim.y, split = blockIdx.y;
  const int chunks = run_chunks(a, tb, te, chunks_per_head(splits, kvh));

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
  int row[R], last[R];
  bool active[R];
#pragma unroll
  for (int i = 0; i < R; ++i) {
    row[i] = warp + kDecodeWarps * i;
    active[i] = row[i] < group;
    last[i] = active[i] ? pos : -1;
  }

  for (int g = g0; g < kvh; g += gstep) {
    __syncthreads(); // every warp is done with the previous kv head's tiles
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const float* src =
          active[i] ? a.q + t * a.q_token_stride + static_cast<int64_t>(g * group + row[i]) * a.q_head_stride : nullptr;
      load_q_row<HD>(tiles.q + row[i] * HD, src, hd, a.scale, lane, 32);
    }
    RowState<HD, R> st;
    st.reset();
    decode_keys<E, HD, R>(st, tiles, kv_rows<E>(c, ok ? slot : 0, g), k0, k1, row, last, group);
#pragma unroll
    for (int i = 0; i < R; ++i) {
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
      for (int k = 0; k < RowState<HD, R>::kDimsPerLane; ++k) {
        const int d = lane + 32 * k;
        if (d < hd) p[2 + d] = st.acc[i][k];
      }
    }
    if (chunks == 1) continue;
    // Last chunk of (token, kv head g) in: merge its rows. The fence publishes this CTA's partials
    // before its ticket; the one after the ticket orders the merge's reads after the others'.
    __shared__ bool last_chunk;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
      last_chunk = atomicInc(&g_merge_tickets[tt * kvh + g], static_cast<unsigned>(chunks - 1)) == chunks - 1;
    __syncthreads();
    if (!last_chunk) continue;
    __threadfence();
    for (int r = warp; r < group; r += kDecodeWarps) merge_row<HD>(a, ws, tb, tt, g * group + r, chunks, lane);
  }
}

// One kernel serves every group size: a warp takes as few rows as the group needs (Qwen3-8B's
// group of 4 and Qwen3.5-27B's of 6: one row per warp).
template <class E, int HD>
__device__ void decode_split_rows(const ninfer_attention_args& a, int64_t tb, int64_t te, float* ws) {
  const int group = a.heads / a.cache.kv_heads;
  static_assert(kDecodeRowsPerWarp == 2, "one path per row count");
  if (group <= kDecodeWarps) decode_split<E, HD, 1>(a, tb, te, ws);
  else decode_split<E, HD, 2>(a, tb, te, ws);
}

} // namespace
} // namespace ninfer::cuda_plugin::attention

// Kernel entry points, one per (head-dim class, cache dtype): float32 caches keep the original
// names, 16-bit ones add _kvf16 / _kvbf16. Every one is held to two CTAs of 256 threads per SM
// (128 registers): unbounded, the hd256 16-bit kernel took 215 and the float32 hd128 one 149,
// one CTA per SM, which would halve the split counts the planner can give a call.
#define NINFER_ATTENTION_DECODE(NAME, E, HD)                                                                 \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::attention::kDecodeThreads, 2)            \
      ninfer_attention_##NAME(ninfer_attention_args a, int64_t b, int64_t e, float* ws) {                    \
    ninfer::cuda_plugin::grid_dependency_prologue();                                                         \
    ninfer::cuda_plugin::attention::decode_split_rows<E, HD>(a, b, e, ws);                                   \
  }
NINFER_ATTENTION_DECODE(decode_hd64, float, 64)
NINFER_ATTENTION_DECODE(decode_hd128, float, 128)
NINFER_ATTENTION_DECODE(decode_hd256, float, 256)
NINFER_ATTENTION_DECODE(decode_hd64_kvf16, __half, 64)
NINFER_ATTENTION_DECODE(decode_hd128_kvf16, __half, 128)
NINFER_ATTENTION_DECODE(decode_hd256_kvf16, __half, 256)
NINFER_ATTENTION_DECODE(decode_hd64_kvbf16, __nv_bfloat16, 64)
NINFER_ATTENTION_DECODE(decode_hd128_kvbf16, __nv_bfloat16, 128)
NINFER_ATTENTION_DECODE(decode_hd256_kvbf16, __nv_bfloat16, 256)

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin::attention {
namespace {

// The kernels of one head-dim class, by cache dtype (kv_dtype_index).
struct DecodeKernel {
  int hd;
  const char* symbols[kKvDtypeCount];
  Kernel kernels[kKvDtypeCount];
};

#define NINFER_DECODE_KERNELS(HD)                                                                            \
  {HD,                                                                                                       \
   {"ninfer_attention_decode_hd" #HD, "ninfer_attention_decode_hd" #HD "_kvf16",                             \
    "ninfer_attention_decode_hd" #HD "_kvbf16"},                                                             \
   {ninfer_attention_decode_hd##HD, ninfer_attention_decode_hd##HD##_kvf16, ninfer_attention_decode_hd##HD##_kvbf16}}
const DecodeKernel kKernels[kHeadDimClassCount] = {NINFER_DECODE_KERNELS(64), NINFER_DECODE_KERNELS(128),
                                                   NINFER_DECODE_KERNELS(256)};
#undef NINFER_DECODE_KERNELS

// Per head-dim class: the cache dtype whose kernel needs the most registers. Its resources are
// the variants' (a plan legal for it is legal for the others: same block, same shared memory),
// and the live-resource queries read that kernel. Set at registration.
int g_planned[kHeadDimClassCount];

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
  else if (chunks > 1 && tokens * a.cache.kv_heads > kDecodeMaxPartials)
    problem = "more (token, kv head) pairs with split keys than the kernel has merge tickets";
  else if (chunks > 1 && (!l->workspace || l->workspace_bytes < need)) problem = "workspace too small for the partials";
  if (problem) {
    std::snprintf(err, err_len, "attention/%s: %s (grid %d x %d, %lld tokens, %d heads / %d kv heads, workspace %zu of "
                  "%zu B)", name, problem, l->grid_x, l->grid_y, static_cast<long long>(tokens), a.heads,
                  a.cache.kv_heads, l->workspace_bytes, need);
    return NINFER_ERR_INVALID_ARGUMENT;
  }
  // Split keys meet through the merge tickets, not a grid barrier: the launch is an ordinary one,
  // so it starts early behind the previous kernel (programmatic dependent launch) like every other
  // decode kernel. The variants stay "cooperative" for the planner only: it sizes the split so all
  // CTAs are resident in one wave, which is still what makes the chunks run side by side.
  return launch_kernel(kernel_of(V).kernels[kv_dtype_index(a.cache.dtype)], dim3(l->grid_x, l->grid_y),
                       kDecodeThreads, a, *l, false, stream, name, err, err_len);
}

constexpr int class_of(int v) { return v / kDecodeSplitCount; }

template <int V>
int32_t query(ninfer_kernel_resources* out, char* err, size_t err_len) {
  const int p = g_planned[class_of(V)];
  return query_kernel_attributes(reinterpret_cast<const void*>(kernel_of(V).kernels[p]), kernel_of(V).symbols[p],
                                 kDecodeThreads, out, err, err_len);
}

template <int V>
int32_t driver_blocks(size_t dyn, int32_t* blocks, char* err, size_t err_len) {
  const int p = g_planned[class_of(V)];
  return query_driver_blocks(reinterpret_cast<const void*>(kernel_of(V).kernels[p]), kDecodeThreads, dyn, blocks,
                             err, err_len);
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
  v.dtype_mask = kKvDtypeMask;
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
  const BuildResource* planned[kHeadDimClassCount] = {};
  for (int c = 0; c < kHeadDimClassCount; ++c)
    for (int d = 0; d < kKvDtypeCount; ++d) {
      const BuildResource* res = find_build_resource(kKernels[c].symbols[d]);
      if (!res) {
        std::snprintf(err, err_len, "attention/decode: kernel %s missing from the build resource table",
                      kKernels[c].symbols[d]);
        return NINFER_ERR_UNSUPPORTED;
      }
      if (!planned[c] || res->registers > planned[c]->registers) {
        planned[c] = res;
        g_planned[c] = d;
      }
    }
  for (int i = 0; i < kVariants; ++i) {
    variants[i].resources = make_resources(*planned[class_of(i)], kDecodeThreads);
    if (int32_t rc = r->add_variant(r->ctx, &variants[i]); rc != NINFER_OK) return rc;
  }
  return NINFER_OK;
}

} // namespace ninfer::cuda_plugin::attention
#endif // __CUDACC_RTC__
