// attention, split-KV decode form (contract: ninfer/abi/ops/attention.h).
//
// A decode token reads a long cache span with one query per head: too little work for one
// CTA per (token, head) to fill the card. Each token gets `splits` CTAs (grid.y = the
// variant's split_k); they divide the token's (kv head, key chunk) pairs among themselves
// (cta_work, attention/decode_merge.cuh).
//
// When keys are cut, each chunk leaves a partial result (running max, sum of weights,
// unnormalised output row) in the caller's workspace and takes a ticket of its (token, kv
// head) from its backend's launch tickets; the chunk that takes the last one merges that kv
// head's rows (merge_if_last_chunk). The variants are declared cooperative so that the planner
// gives a call the largest split count whose tokens x splits CTAs are all resident on the device
// in one wave: the split follows the device (SM count, registers, shared memory), never a
// constant. The launch itself is ordinary
// (no grid barrier), so it starts early behind the previous kernel. Which split counts may serve
// a shape (enough keys per chunk, a bounded workspace) is decided by decode_serves() in
// attention/shapes.hpp.
//
// Inside a CTA, three designs, by head-dim class and cache dtype (decode_by_keys in
// attention/shapes.hpp; the tensor-core kernels in kKernels below):
//   - warps own rows (attention/decode_rows.cuh): the CTA walks the chunk one shared K/V tile at a
//     time, each warp one or two of the group's query heads; hd64, and hd128 with a float32
//     cache or rows that are not 16-byte vectors;
//   - tensor cores (attention/decode_mma.cuh): each warp its own 16-key tiles with the whole
//     group as the rows of one MMA; hd128 with a 16-bit cache (Qwen3), and hd256 with one
//     (Qwen3.5) in sm_90 builds;
//   - warps own keys (attention/decode_keys.cuh): each warp its own tiles with all of the group's
//     rows, meeting once at the end; hd256 with other caches or builds. Measured on the H200
//     (docs/performance.md): Qwen3.5-27B at context 4096 69.5 -> 70.7 tok/s against warps owning
//     rows; on Qwen3-8B (hd128) it was slower (197.0 / 178.7 against 221.9 / 191.1 at contexts
//     0 / 4096), bound by instruction latency with its 250 registers.
//
// The cache may be float32, float16 or bfloat16 (one kernel per cache dtype, the variant
// launches the call's), widened exactly to float32 as it is read (tensor cores: used as stored,
// with q rounded to its format), or a compact format (int8, fp8, int4r): those take the float32
// cache's design, warps owning keys widening codes in registers where decode_by_keys holds
// (attention/decode_warp_codes.cuh), warps owning rows widening them as each tile is staged
// elsewhere (attention/kv_compact.cuh).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "attention/decode_keys.cuh"
#include "attention/decode_mma.cuh"
#include "attention/decode_rows.cuh"
#include "common/grid_dependency.cuh"
#include "ninfer/abi/ops/head_norm_rope_append_attention.h"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "../../cuda_variant.hpp"
#include "attention/host.hpp"
#endif

// Kernel entry points, one per (head-dim class, cache dtype): float32 caches keep the original
// names, the others add the cache's (_kvf16, _kvbf16, _kvint8, _kvfp8, _kvint4r). The row-owning
// kernels are held to two CTAs of 256 threads per SM (128 registers): unbounded, the float32
// hd128 one took 149, one CTA per SM, which would halve the split counts the planner can give a
// call. The key-owning hd256 kernels keep one CTA per SM (decode_min_ctas): held to 128 registers
// the 16-bit ones spilled 460-530 bytes and decoded Qwen3.5-27B at 68.5 tok/s at context 4096
// against 70.3 unbounded.
#define NINFER_ATTENTION_DECODE(NAME, E, HD)                                                                 \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::attention::kDecodeThreads,               \
                                               ninfer::cuda_plugin::attention::decode_min_ctas(HD))          \
      ninfer_attention_##NAME(ninfer_attention_args a, int64_t b, int64_t e,                                 \
                              ninfer::cuda_plugin::attention::LaunchScratch ws) {                            \
    ninfer::cuda_plugin::grid_dependency_prologue();                                                         \
    if constexpr (ninfer::cuda_plugin::attention::decode_by_keys(HD))                                        \
      ninfer::cuda_plugin::attention::decode_split_keys_rows<E, HD>(a, b, e, ws);                            \
    else                                                                                                     \
      ninfer::cuda_plugin::attention::decode_split_rows<E, HD>(a, b, e, ws);                                 \
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

// Compact caches (attention/kv_compact.cuh): hd256 on the key-owning walk that widens codes in
// registers (attention/decode_warp_codes.cuh), the other classes staging them into float tiles.
NINFER_ATTENTION_DECODE(decode_hd64_kvint8, ninfer::cuda_plugin::attention::KvInt8, 64)
NINFER_ATTENTION_DECODE(decode_hd128_kvint8, ninfer::cuda_plugin::attention::KvInt8, 128)
NINFER_ATTENTION_DECODE(decode_hd256_kvint8, ninfer::cuda_plugin::attention::KvInt8, 256)
NINFER_ATTENTION_DECODE(decode_hd64_kvfp8, ninfer::cuda_plugin::attention::KvFp8, 64)
NINFER_ATTENTION_DECODE(decode_hd128_kvfp8, ninfer::cuda_plugin::attention::KvFp8, 128)
NINFER_ATTENTION_DECODE(decode_hd256_kvfp8, ninfer::cuda_plugin::attention::KvFp8, 256)
NINFER_ATTENTION_DECODE(decode_hd64_kvint4r, ninfer::cuda_plugin::attention::KvInt4r, 64)
NINFER_ATTENTION_DECODE(decode_hd128_kvint4r, ninfer::cuda_plugin::attention::KvInt4r, 128)
NINFER_ATTENTION_DECODE(decode_hd256_kvint4r, ninfer::cuda_plugin::attention::KvInt4r, 256)

// The tensor-core design's entry points (16-bit caches): the launch takes them when the call's
// cache rows are 16-byte vectors, the kernels above otherwise. Its own kernel, so neither design's
// registers constrain the other's (in one kernel with the row-owning walk, the hd128 pair spilled
// 108 bytes at the two-CTA bound of 128 registers; alone, 16). hd128 runs two CTAs per SM; hd256
// one (its 128 accumulators a lane, and 140 KB of shared memory for the 8 warps' 16-key tiles of
// 256 dims), so only where a CTA may have that much: sm_90 builds (227 KB) route to them. The
// 100 KB cards (sm_89, sm_120a) and cuda-generic keep hd256 on the key-owning walk; their builds
// still compile the kernels, so every build holds the same kernel set (cuda-generic's NVRTC
// programs are checked against the exact plugin's).
#define NINFER_ATTENTION_DECODE_MMA(NAME, E, HD, MIN_CTAS)                                                   \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::attention::kDecodeThreads, MIN_CTAS)     \
      ninfer_attention_##NAME(ninfer_attention_args a, int64_t b, int64_t e,                                 \
                              ninfer::cuda_plugin::attention::LaunchScratch ws) {                            \
    const ninfer_head_norm_rope_append_args none{};                                                          \
    ninfer::cuda_plugin::attention::decode_split_mma<E, HD, false>(a, none, b, e, ws); /* own launch wait */  \
  }
NINFER_ATTENTION_DECODE_MMA(decode_mma_hd128_kvf16, __half, 128, 2)
NINFER_ATTENTION_DECODE_MMA(decode_mma_hd128_kvbf16, __nv_bfloat16, 128, 2)
NINFER_ATTENTION_DECODE_MMA(decode_mma_hd256_kvf16, __half, 256, 1)
NINFER_ATTENTION_DECODE_MMA(decode_mma_hd256_kvbf16, __nv_bfloat16, 256, 1)
#if defined(NINFER_KERNELS_CC_MAJOR) && NINFER_KERNELS_CC_MAJOR == 9
#define NINFER_DECODE_MMA_HD256 1
#else
#define NINFER_DECODE_MMA_HD256 0
#endif

// head_norm_rope_append_attention: the same kernel with the fold
// (attention/head_norm_rope_append_attention.cuh).
#define NINFER_ATTENTION_DECODE_FOLD(NAME, E, HD)                                                            \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::attention::kDecodeThreads, 2)            \
      ninfer_head_norm_rope_append_attention_##NAME(ninfer_head_norm_rope_append_attention_args a, int64_t b,     \
                                                    int64_t e, ninfer::cuda_plugin::attention::LaunchScratch ws) { \
    ninfer::cuda_plugin::attention::decode_split_mma<E, HD, true>(a.attn, a.prep, b, e, ws);                \
  }
NINFER_ATTENTION_DECODE_FOLD(decode_hd128_kvf16, __half, 128)
NINFER_ATTENTION_DECODE_FOLD(decode_hd128_kvbf16, __nv_bfloat16, 128)

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin::attention {

bool decode_runs_enabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("NINFER_DECODE_RUNS");
    return !(env && std::strcmp(env, "0") == 0);
  }();
  return enabled;
}

namespace {

// The kernels of one head-dim class, by cache dtype (kv_dtype_index); mma: the tensor-core
// design's, null where that class and dtype have none. This table is the one place that says
// which calls may run on tensor cores. compact: the compact formats' (kv_compact_index).
struct DecodeKernel {
  int hd;
  const char* symbols[kKvDtypeCount];
  Kernel kernels[kKvDtypeCount];
  const char* mma_symbols[kKvDtypeCount];
  Kernel mma[kKvDtypeCount];
  const char* compact_symbols[kKvCompactCount];
  Kernel compact[kKvCompactCount];
};

#define NINFER_DECODE_KERNELS(HD)                                                                            \
  {"ninfer_attention_decode_hd" #HD, "ninfer_attention_decode_hd" #HD "_kvf16",                              \
   "ninfer_attention_decode_hd" #HD "_kvbf16"},                                                              \
  {ninfer_attention_decode_hd##HD, ninfer_attention_decode_hd##HD##_kvf16, ninfer_attention_decode_hd##HD##_kvbf16}
#define NINFER_DECODE_COMPACT_KERNELS(HD)                                                                    \
  {"ninfer_attention_decode_hd" #HD "_kvint8", "ninfer_attention_decode_hd" #HD "_kvfp8",                    \
   "ninfer_attention_decode_hd" #HD "_kvint4r"},                                                             \
  {ninfer_attention_decode_hd##HD##_kvint8, ninfer_attention_decode_hd##HD##_kvfp8,                          \
   ninfer_attention_decode_hd##HD##_kvint4r}
const DecodeKernel kKernels[kHeadDimClassCount] = {
    {64, NINFER_DECODE_KERNELS(64), {}, {}, NINFER_DECODE_COMPACT_KERNELS(64)},
    {128,
     NINFER_DECODE_KERNELS(128),
     {nullptr, "ninfer_attention_decode_mma_hd128_kvf16", "ninfer_attention_decode_mma_hd128_kvbf16"},
     {nullptr, ninfer_attention_decode_mma_hd128_kvf16, ninfer_attention_decode_mma_hd128_kvbf16},
     NINFER_DECODE_COMPACT_KERNELS(128)},
#if NINFER_DECODE_MMA_HD256
    {256,
     NINFER_DECODE_KERNELS(256),
     {nullptr, "ninfer_attention_decode_mma_hd256_kvf16", "ninfer_attention_decode_mma_hd256_kvbf16"},
     {nullptr, ninfer_attention_decode_mma_hd256_kvf16, ninfer_attention_decode_mma_hd256_kvbf16},
     NINFER_DECODE_COMPACT_KERNELS(256)}};
#else
    {256, NINFER_DECODE_KERNELS(256), {}, {}, NINFER_DECODE_COMPACT_KERNELS(256)}};
#endif
#undef NINFER_DECODE_KERNELS
#undef NINFER_DECODE_COMPACT_KERNELS

// Per head-dim class: the kernel that needs the most registers, among every cache dtype's and
// the tensor-core ones (on sm_89 the float32-tile kernels need fewer than the tensor-core ones,
// on sm_90 all take 128). Its resources are the variants' (a plan legal for it is legal for the
// others: same block, and shared memory is the call's, dyn_smem), and the live-resource queries
// read that kernel. Set at registration. After the classes, the fold's (kFoldPlan).
struct PlannedKernel {
  Kernel kernel;
  const char* symbol;
};
constexpr int kFoldPlan = kHeadDimClassCount;
PlannedKernel g_planned[kHeadDimClassCount + 1];

// Keeps in g_planned[p] (and `planned`, its build resources) whichever of it and `kernel` needs
// more registers. Every decode kernel must be in the build resource table.
int32_t plan_kernel(int p, const char* symbol, Kernel kernel, const BuildResource*& planned, char* err,
                    size_t err_len) {
  const BuildResource* res = find_build_resource(symbol);
  if (!res) {
    std::snprintf(err, err_len, "attention/decode: kernel %s missing from the build resource table", symbol);
    return NINFER_ERR_UNSUPPORTED;
  }
  if (!planned || res->registers > planned->registers) {
    planned = res;
    g_planned[p] = {kernel, symbol};
  }
  return NINFER_OK;
}

// What every split-KV decode variant (the attention's and the fold's) declares alike.
void fill_decode_common(ninfer_variant& v, int split) {
  v.exec = NINFER_EXEC_CUDA;
  v.geometry = NINFER_GEOMETRY_TOKEN_TILED;
  v.cooperative = 1; // for the planner only: the launch is ordinary (see launch below)
  v.split_k = split;
  v.tokens_per_cta = 1;
}

// Variant V: head-dim class V / kDecodeSplitCount, split count V % kDecodeSplitCount.
constexpr int kVariants = kHeadDimClassCount * kDecodeSplitCount;
constexpr const DecodeKernel& kernel_of(int v) { return kKernels[v / kDecodeSplitCount]; }
constexpr int split_of(int v) { return kDecodeSplits[v % kDecodeSplitCount]; }

char g_names[kVariants][32]; // "decode_split512_hd256"

// Shared memory a call needs of a class's kernels: the key-owning design's (every cache dtype's,
// compact ones included) follows the GQA group, the others' the cache dtype; a 16-bit cache may
// take the tensor-core kernel, chosen at launch, so it is planned with the larger of the two. The
// plan (dyn_smem) and the launch's check both ask this.
size_t decode_smem_bytes(const DecodeKernel& k, int64_t group, int32_t cache_dtype) {
  const size_t walk = decode_by_keys(k.hd) ? decode_keys_smem_bytes(k.hd, group) : smem_bytes(k.hd, kRows);
  const int d = kv_dtype_index(cache_dtype);
  return d >= 0 && k.mma[d] ? std::max(walk, decode_mma_smem_bytes(k.hd)) : walk;
}

template <int V>
size_t dyn_smem(const void*, const ninfer_shape* s) {
  if (decode_by_keys(kernel_of(V).hd) && s->dims[2] <= 0) return 0;
  return decode_smem_bytes(kernel_of(V), s->dims[2] > 0 ? s->dims[1] / s->dims[2] : 0, s->dtype);
}

template <int V>
size_t workspace(const void*, const ninfer_shape* s, int64_t) {
  return workspace_bytes(*s);
}

// The largest call a class's decode serves on a cache of `dtype`: the tensor-core kernel's runs
// share K/V tiles among a sequence's tokens, the other designs read them once per token. hd256
// keeps the smaller limit on tensor cores too: calls of 65-128 tokens there (a run holds only two
// tokens of a group of 6) were never measured against the prefill kernel.
int64_t decode_max_tokens(const DecodeKernel& k, int32_t dtype) {
  const int d = kv_dtype_index(dtype);
  return d >= 0 && k.mma[d] && !decode_by_keys(k.hd) ? kDecodeRunsMaxTokens : kDecodeMaxTokens;
}

template <int V>
int32_t supports(const void*, const ninfer_shape* s) {
  return basic_shape_ok(*s, kernel_of(V).hd) && cache_dtype_ok(*s, true) &&
         decode_serves(*s, split_of(V), decode_max_tokens(kernel_of(V), s->dtype));
}

// What every split-KV decode launch needs of its call, beyond check_args: one CTA per token, a
// group the kernel has rows for, the shared memory `smem` it needs, and merge tickets and
// workspace for split keys.
int32_t check_decode_launch(const ninfer_attention_args& a, const ninfer_launch& l, size_t smem, const char* name,
                            char* err, size_t err_len) {
  const int64_t tokens = l.token_end - l.token_begin;
  const int group = a.heads / a.cache.kv_heads;
  const int chunks = chunks_per_head(l.grid_y, a.cache.kv_heads);
  const size_t need = static_cast<size_t>(tokens * a.cache.kv_heads * chunks * group *
                                          partial_floats(a.cache.head_dim)) * sizeof(float);
  const char* problem = nullptr;
  if (l.grid_x != tokens || l.grid_y < 1) problem = "grid.x must equal the launch's tokens (one CTA per token)";
  else if (group > kDecodeMaxGroup) problem = "more query heads per kv head than the decode kernel has rows";
  else if (l.dynamic_smem_bytes < smem)
    problem = "planned with less shared memory than the call's group and cache dtype need";
  else if (chunks > 1 && tokens * a.cache.kv_heads > kDecodeMaxPartials)
    problem = "more (token, kv head) pairs with split keys than the kernel has merge tickets";
  else if (chunks > 1 && !l.tickets) problem = "split keys need the backend's launch tickets (ninfer_launch.tickets)";
  else if (chunks > 1 && (!l.workspace || l.workspace_bytes < need)) problem = "workspace too small for the partials";
  if (!problem) return NINFER_OK;
  std::snprintf(err, err_len, "attention/%s: %s (grid %d x %d, %lld tokens, %d heads / %d kv heads, workspace %zu of "
                "%zu B)", name, problem, l.grid_x, l.grid_y, static_cast<long long>(tokens), a.heads,
                a.cache.kv_heads, l.workspace_bytes, need);
  return NINFER_ERR_INVALID_ARGUMENT;
}

// The cluster size a tensor-core decode launch takes (attention/decode_cluster.cuh): the planned
// chunks per kv head when the grid is exactly kv_heads x chunks, the chunks fit one cluster, the
// group's rows fit the q tile's space, and the device holds all of the launch's clusters at once
// (a cluster is placed only where its CTAs all fit in one GPC, so a grid that fits as single
// CTAs may not fit as clusters: a second wave of clusters cost more than the merge saves); else
// 1 (the chunks meet through L2). On the H200 a kernel of the fold's block and shared memory
// (two CTAs per SM) fits 14 clusters of 16, 30 of 8, 62 of 4: Qwen3-8B at batch 1 and 4,096 keys
// (8 clusters of 16) merges in clusters, batch 8 (64 clusters of 4) through L2, where clusters
// measure 1,099.8 tok/s against 1,186.6 (docs/performance.md).
// A call with fewer sequences than tokens holds runs (attention/decode_runs.cuh), which share
// the grid out in their own way: no clusters then.
unsigned decode_cluster(const void* kernel, const ninfer_attention_args& a, const ninfer_launch& l) {
  const int kvh = a.cache.kv_heads, chunks = chunks_per_head(l.grid_y, kvh);
  if (!cluster_launch_enabled() || chunks < 2 || chunks > kDecodeMaxClusterChunks || l.grid_y != kvh * chunks ||
      a.heads / kvh > kDecodeClusterMaxGroup)
    return 1;
  if (decode_runs_enabled() && a.batch.num_seqs < l.token_end - l.token_begin) return 1;
  const int64_t clusters = static_cast<int64_t>(l.grid_x) * kvh;
  return clusters <= max_active_clusters(kernel, chunks, dim3(kDecodeThreads), l.dynamic_smem_bytes) ? chunks : 1;
}

template <int V>
int32_t launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  const auto& a = *static_cast<const ninfer_attention_args*>(args);
  const char* name = g_names[V];
  if (int32_t rc = check_args(a, *l, kernel_of(V).hd, true, name, err, err_len); rc != NINFER_OK) return rc;
  const int group = a.heads / a.cache.kv_heads;
  if (int32_t rc = check_decode_launch(a, *l, decode_smem_bytes(kernel_of(V), group, a.cache.dtype), name, err, err_len);
      rc != NINFER_OK)
    return rc;
  // Split keys meet through the merge tickets, not a grid barrier: the launch is an ordinary one,
  // so it starts early behind the previous kernel (programmatic dependent launch) like every other
  // decode kernel. The variants stay "cooperative" for the planner only: it sizes the split so all
  // CTAs are resident in one wave, which is still what makes the chunks run side by side.
  const int d = kv_dtype_index(a.cache.dtype);
  if (d < 0) // a compact cache (check_args took it): its format's kernel
    return launch_kernel(kernel_of(V).compact[kv_compact_index(a.cache.dtype)], dim3(l->grid_x, l->grid_y),
                         kDecodeThreads, a, *l, false, stream, name, err, err_len);
  const Kernel mma = kernel_of(V).mma[d];
  const bool vec = kv_vector_rows(a.cache, a.cache.dtype == NINFER_DTYPE_F32 ? 4 : 2);
  if (mma && vec)
    return launch_kernel(mma, dim3(l->grid_x, l->grid_y), kDecodeThreads, a, *l, false, stream, name, err, err_len,
                         decode_cluster(reinterpret_cast<const void*>(mma), a, *l));
  return launch_kernel(kernel_of(V).kernels[d], dim3(l->grid_x, l->grid_y), kDecodeThreads, a, *l, false, stream,
                       name, err, err_len);
}

constexpr int class_of(int v) { return v / kDecodeSplitCount; }

// The live-resource queries of the variants planned with g_planned[P].
template <int P>
int32_t query(const void*, ninfer_kernel_resources* out, char* err, size_t err_len) {
  const PlannedKernel& p = g_planned[P];
  return query_kernel_attributes(reinterpret_cast<const void*>(p.kernel), p.symbol, kDecodeThreads, out, err,
                                 err_len);
}

template <int P>
int32_t driver_blocks(const void*, size_t dyn, int32_t* blocks, char* err, size_t err_len) {
  return query_driver_blocks(reinterpret_cast<const void*>(g_planned[P].kernel), kDecodeThreads, dyn, blocks, err,
                             err_len);
}

template <int V>
void fill(ninfer_variant& v) {
  std::snprintf(g_names[V], sizeof g_names[V], "decode_split%d_hd%d", split_of(V), kernel_of(V).hd);
  fill_decode_common(v, split_of(V));
  v.op = NINFER_OP_ATTENTION;
  v.name = g_names[V];
  v.dtype_mask = kKvDtypeMask | kKvCompactMask;
  v.dynamic_smem_bytes = dyn_smem<V>;
  v.workspace_bytes = workspace<V>;
  v.supports = supports<V>;
  v.launch = launch<V>;
  v.query_loaded_resources = query<class_of(V)>;
  v.query_driver_blocks_per_sm = driver_blocks<class_of(V)>;
}

template <int... V>
void fill_all(ninfer_variant* out, std::integer_sequence<int, V...>) {
  (fill<V>(out[V]), ...);
}

// head_norm_rope_append_attention's variants: the hd128 class's tensor-core decode with the fold
// (attention/head_norm_rope_append_attention.cuh), one per split count, 16-bit caches with 16-byte
// rows only; one kernel per cache dtype. Planned like the attention's (same split rule, residency,
// workspace).
using FoldKernel = void (*)(ninfer_head_norm_rope_append_attention_args, int64_t, int64_t, LaunchScratch);
constexpr int kFoldHd = 128;
const char* const kFoldSymbols[kKvDtypeCount] = {nullptr, "ninfer_head_norm_rope_append_attention_decode_hd128_kvf16",
                                                 "ninfer_head_norm_rope_append_attention_decode_hd128_kvbf16"};
const FoldKernel kFoldKernels[kKvDtypeCount] = {nullptr, ninfer_head_norm_rope_append_attention_decode_hd128_kvf16,
                                                ninfer_head_norm_rope_append_attention_decode_hd128_kvbf16};
constexpr uint32_t kFoldDtypeMask = (1u << NINFER_DTYPE_F16) | (1u << NINFER_DTYPE_BF16);
char g_fold_names[kDecodeSplitCount][32]; // "decode_split512_hd128"

constexpr size_t fold_smem_bytes() { return decode_mma_smem_bytes(kFoldHd) + decode_fold_extra_bytes(kFoldHd); }

size_t fold_dyn_smem(const void*, const ninfer_shape*) { return fold_smem_bytes(); }

template <int S>
int32_t fold_supports(const void*, const ninfer_shape* s) {
  return basic_shape_ok(*s, kFoldHd) && s->dims[0] % 8 == 0 && (kFoldDtypeMask >> s->dtype & 1u) &&
         decode_serves(*s, kDecodeSplits[S], kDecodeMaxTokens); // no runs: one token per CTA
}

template <int S>
int32_t fold_launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  const auto& f = *static_cast<const ninfer_head_norm_rope_append_attention_args*>(args);
  const ninfer_attention_args& a = f.attn;
  const ninfer_head_norm_rope_args& r = f.prep.rope;
  const char* name = g_fold_names[S];
  const char* why = ninfer_head_norm_rope_append_attention_untied(&f);
  if (!why && (r.rotary_dim <= 0 || r.rotary_dim % 2 || r.rotary_dim > r.head_dim))
    why = "rotary_dim must be even and in (0, head_dim]";
  else if (!why && (kv_dtype_index(a.cache.dtype) < 1 || !kv_vector_rows(a.cache, 2)))
    why = "the cache must be float16 or bfloat16 with 16-byte aligned rows";
  if (why) {
    std::snprintf(err, err_len, "head_norm_rope_append_attention/%s: %s", name, why);
    return NINFER_ERR_INVALID_ARGUMENT;
  }
  if (int32_t rc = check_args(a, *l, kFoldHd, false, name, err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = check_decode_launch(a, *l, fold_smem_bytes(), name, err, err_len); rc != NINFER_OK) return rc;
  const FoldKernel k = kFoldKernels[kv_dtype_index(a.cache.dtype)];
  return launch_kernel(k, dim3(l->grid_x, l->grid_y), kDecodeThreads, f, *l, false, stream, name, err, err_len,
                       decode_cluster(reinterpret_cast<const void*>(k), a, *l));
}

template <int S>
void fill_fold(ninfer_variant& v) {
  std::snprintf(g_fold_names[S], sizeof g_fold_names[S], "decode_split%d_hd%d", kDecodeSplits[S], kFoldHd);
  fill_decode_common(v, kDecodeSplits[S]);
  v.op = NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION;
  v.name = g_fold_names[S];
  v.dtype_mask = kFoldDtypeMask;
  v.dynamic_smem_bytes = fold_dyn_smem;
  v.workspace_bytes = workspace<0>;
  v.supports = fold_supports<S>;
  v.launch = fold_launch<S>;
  v.query_loaded_resources = query<kFoldPlan>;
  v.query_driver_blocks_per_sm = driver_blocks<kFoldPlan>;
}

template <int... S>
void fill_folds(ninfer_variant* out, std::integer_sequence<int, S...>) {
  (fill_fold<S>(out[S]), ...);
}

// Registers the fold's variants, planned with the resources of its kernel that needs the most
// registers.
int32_t register_fold(const ninfer_registrar* r, char* err, size_t err_len) {
  static ninfer_variant variants[kDecodeSplitCount];
  fill_folds(variants, std::make_integer_sequence<int, kDecodeSplitCount>{});
  const BuildResource* planned = nullptr;
  for (int d = 0; d < kKvDtypeCount; ++d)
    if (kFoldKernels[d])
      if (int32_t rc = plan_kernel(kFoldPlan, kFoldSymbols[d], reinterpret_cast<Kernel>(kFoldKernels[d]), planned,
                                   err, err_len);
          rc != NINFER_OK)
        return rc;
  for (auto& v : variants) {
    v.resources = make_resources(*planned, kDecodeThreads);
    if (int32_t rc = r->add_variant(r->ctx, &v); rc != NINFER_OK) return rc;
  }
  return NINFER_OK;
}

} // namespace

int32_t register_attention_decode(const ninfer_registrar* r, char* err, size_t err_len) {
  static ninfer_variant variants[kVariants];
  fill_all(variants, std::make_integer_sequence<int, kVariants>{});
  const BuildResource* planned[kHeadDimClassCount] = {};
  for (int c = 0; c < kHeadDimClassCount; ++c) {
    for (int d = 0; d < kKvDtypeCount; ++d)
      for (const auto& [symbol, kernel] : {std::pair{kKernels[c].symbols[d], kKernels[c].kernels[d]},
                                           std::pair{kKernels[c].mma_symbols[d], kKernels[c].mma[d]}}) {
        if (!kernel) continue; // no tensor-core kernel for this class and dtype
        if (int32_t rc = plan_kernel(c, symbol, kernel, planned[c], err, err_len); rc != NINFER_OK) return rc;
      }
    for (int d = 0; d < kKvCompactCount; ++d)
      if (int32_t rc = plan_kernel(c, kKernels[c].compact_symbols[d], kKernels[c].compact[d], planned[c], err, err_len);
          rc != NINFER_OK)
        return rc;
  }
  for (int i = 0; i < kVariants; ++i) {
    variants[i].resources = make_resources(*planned[class_of(i)], kDecodeThreads);
    if (int32_t rc = r->add_variant(r->ctx, &variants[i]); rc != NINFER_OK) return rc;
  }
  return register_fold(r, err, err_len);
}

} // namespace ninfer::cuda_plugin::attention
#endif // __CUDACC_RTC__
