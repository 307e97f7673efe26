// Host side shared by the attention variant tables: argument checks made before a launch (a
// bad call gets a message naming what is wrong instead of a kernel reading out of bounds) and
// the launch itself.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>

#include "attention/shapes.hpp"
#include "common/cluster_launch.hpp"
#include "common/grid_dependency.cuh"
#include "ninfer/abi/ops/attention.h"
#include "ninfer/abi/plugin_abi.h"

namespace ninfer::cuda_plugin::attention {

// Checks what the kernels rely on. Positions, slots and table entries live in device memory, so
// positions and slots are checked in the kernels instead (a token outside the cache gets NaN
// rows); the table entries of the positions a token reads are the caller's to get right.
// What a compact cache (kv_append.h) must be for the kernels that read it (attention/kv_compact.cuh):
// its format's head_dim, scales, and codes and scales aligned for the pieces' vector loads.
inline const char* compact_cache_problem(const ninfer_kv_cache& c) {
  if (!compact_head_dim_ok(c.dtype, c.head_dim))
    return "head_dim not one the compact format takes here (int8: a multiple of 64; fp8: a multiple of 16; int4r: a "
           "power of two >= 64)";
  if (!c.k_scale || !c.v_scale) return "a compact cache needs k_scale and v_scale";
  const uintptr_t codes = reinterpret_cast<uintptr_t>(c.k) | reinterpret_cast<uintptr_t>(c.v);
  const uintptr_t scales = reinterpret_cast<uintptr_t>(c.k_scale) | reinterpret_cast<uintptr_t>(c.v_scale);
  if (codes & 15u) return "a compact cache's codes must be 16-byte aligned";
  if (scales & (c.dtype == NINFER_DTYPE_KV_FP8 ? 3u : 1u)) return "a compact cache's scales must be aligned to their size";
  return nullptr;
}

// reads_compact: whether the variant has kernels for the compact formats (the tensor-core ones do
// not: they take float32, float16 and bfloat16 caches).
inline int32_t check_args(const ninfer_attention_args& a, const ninfer_launch& l, int hd_class, bool reads_compact,
                          const char* variant, char* err, size_t err_len) {
  const ninfer_kv_cache& c = a.cache;
  const bool compact = kv_compact_index(c.dtype) >= 0;
  const char* problem = nullptr;
  if (!a.q || !a.out || !c.k || !c.v) problem = "null q, out or cache pointer";
  else if (!a.batch.seq_start || !a.batch.seq_slot || !a.batch.token_pos || !a.batch.token_seq)
    problem = "null token batch array";
  else if (kv_dtype_index(c.dtype) < 0 && !compact)
    problem = "the cache must be float32, float16, bfloat16, int8, fp8 or int4r";
  else if (compact && !reads_compact)
    problem = "this variant reads float32, float16 and bfloat16 caches only; int8, fp8 and int4r caches are read by "
              "the tiled prefill and the split-KV decode";
  else if (compact && compact_cache_problem(c)) problem = compact_cache_problem(c);
  else if (c.kv_heads <= 0 || a.heads <= 0 || a.heads % c.kv_heads != 0) problem = "heads must be a multiple of kv_heads";
  else if (!head_dim_in_class(c.head_dim, hd_class)) problem = "head_dim outside this variant's class";
  else if (l.token_begin < 0 || l.token_end > a.tokens || l.token_begin >= l.token_end) problem = "bad token range";
  else if (const char* layout = ninfer_kv_cache_layout_error(&c)) problem = layout;
  else if (!kv_tiles_fit_blocks(c.block_tokens))
    problem = "block_tokens must be a power of two >= NINFER_ATTENTION_TILE_BLOCK_TOKENS (every key tile in one block)";
  if (!problem) return NINFER_OK;
  std::snprintf(err, err_len, "attention/%s: %s (heads %d, kv_heads %d, head_dim %d, cache dtype %d, tokens [%lld,%lld) of %lld)",
                variant, problem, a.heads, c.kv_heads, c.head_dim, c.dtype, static_cast<long long>(l.token_begin),
                static_cast<long long>(l.token_end), static_cast<long long>(a.tokens));
  return NINFER_ERR_INVALID_ARGUMENT;
}

// Whether the tensor-core decode may give a CTA several tokens of one sequence
// (attention/decode_runs.cuh): yes unless NINFER_DECODE_RUNS is 0 (an A/B switch). decode.cu.
bool decode_runs_enabled();

// Every attention kernel takes (args, token_begin, token_end, scratch).
using Kernel = void (*)(ninfer_attention_args, int64_t, int64_t, LaunchScratch);

// Args: the op's argument struct (attention's; head_norm_rope_append_attention's for the fold).
// cluster_y > 1: in clusters (common/cluster_launch.hpp; never cooperative).
template <class Args>
int32_t launch_kernel(void (*k)(Args, int64_t, int64_t, LaunchScratch), dim3 grid, int threads, const Args& args,
                      const ninfer_launch& l, bool cooperative, void* stream, const char* variant, char* err,
                      size_t err_len, unsigned cluster_y = 1) {
  Args a = args;
  int64_t b = l.token_begin, e = l.token_end;
  LaunchScratch ws{static_cast<float*>(l.workspace), l.tickets, static_cast<int64_t>(l.workspace_bytes / sizeof(float)),
                   decode_runs_enabled()};
  cudaError_t rc = set_max_dynamic_smem(reinterpret_cast<const void*>(k), l.dynamic_smem_bytes);
  if (rc == cudaSuccess) {
    void* params[] = {&a, &b, &e, &ws};
    auto s = static_cast<cudaStream_t>(stream);
    const void* kernel = reinterpret_cast<const void*>(k);
    rc = cluster_y > 1 ? launch_kernel_in_clusters(kernel, grid, dim3(threads), params, l.dynamic_smem_bytes, s,
                                                   cluster_y)
                       : ninfer::cuda_plugin::launch_kernel(kernel, grid, dim3(threads), params,
                                                            l.dynamic_smem_bytes, s, cooperative);
  }
  if (rc != cudaSuccess) {
    std::snprintf(err, err_len,
                  "attention/%s: launch grid (%u,%u,%u) cluster y %u block %d smem %zu tokens [%lld,%lld): %s",
                  variant, grid.x, grid.y, grid.z, cluster_y, threads, l.dynamic_smem_bytes,
                  static_cast<long long>(b), static_cast<long long>(e), cudaGetErrorString(rc));
    cudaGetLastError(); // a failed launch leaves a non-sticky error; clear it for the next call
    return NINFER_ERR_LAUNCH;
  }
  return NINFER_OK;
}

// The variant families (attention/prefill.cu, attention/prefill_mma.cu, attention/decode.cu).
int32_t register_attention_prefill(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_attention_prefill_mma(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_attention_decode(const ninfer_registrar* r, char* err, size_t err_len);

} // namespace ninfer::cuda_plugin::attention
