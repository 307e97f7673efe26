// What the Gated DeltaNet kernel files (gated_deltanet/*.cu) share: how one of their kernels
// is described to the planner and launched, and the family's registration pieces.
//
// Launch geometry. The planner sizes grid.x from the call's tokens (tokens_per_cta) and
// grid.y from split_k; these kernels walk sequences, so every one of them strides over its
// work along grid.x and is correct for any grid.x >= 1 (geometry TOKEN_TILED_GRID_STRIDE,
// never cooperative). The gated delta rule adds grid.z = value heads x value-column blocks:
// those are independent problems of the op whose count comes from the call's arguments, not
// from the device, and a non-cooperative launch is legal for any number of them. The fused
// decode ops (gated_deltanet/conv_l2_norm.cu, gated_deltanet/gated_delta_step.cu) take one token
// per CTA and add grid.y for theirs: channel blocks of one normed head, or value heads.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#ifndef __CUDACC_RTC__ // host side; NVRTC compiles device code only (cuda-generic, docs/plugins.md)
#include "../../cuda_variant.hpp"
#endif

// Every byte of shared memory these kernels use is dynamic (sized per shape by the variant),
// so the build-time table's static figure is zero and the planner sees the real total.
extern __shared__ __align__(16) unsigned char ninfer_gated_deltanet_smem[];

namespace ninfer::cuda_plugin::gated_deltanet {

// CUDA's limit on grid.z, where the gated delta rule puts its (value head, column block) problems.
constexpr int32_t kMaxGridZ = 65535;

#ifndef __CUDACC_RTC__
// One compiled kernel of the family.
struct KernelInfo {
  const char* op;
  const char* variant;
  const char* symbol; // extern "C" name: the key of the build-time resource table
  const void* kernel;
  int32_t threads;    // block size, equal to the kernel's __launch_bounds__
};

// Raises the kernel's dynamic shared memory limit to the launch's figure and launches `grid`
// with the planner's block size on `stream`. On failure writes "op/variant: grid ... tokens
// [b, e): <CUDA error>" to err and returns NINFER_ERR_LAUNCH.
int32_t launch_kernel(const KernelInfo& k, dim3 grid, const ninfer_launch* l, void** params, void* stream,
                      char* err, size_t err_len);

// Fills what every variant of the family shares: CUDA execution, float32 only, grid-stride
// geometry, no split, and the kernel's resources from the build-time table. Returns
// NINFER_ERR_UNSUPPORTED (with a message) when the kernel is missing from that table.
int32_t describe_kernel(const KernelInfo& k, int32_t tokens_per_cta, int32_t split_k, ninfer_variant& v, char* err,
                        size_t err_len);

// describe_kernel, plus the variant's live resource queries on kernel K (the one the form
// declares to the planner).
template <const KernelInfo& K>
int32_t describe_form(int32_t tokens_per_cta, int32_t split_k, ninfer_variant& v, char* err, size_t err_len) {
  if (int32_t rc = describe_kernel(K, tokens_per_cta, split_k, v, err, err_len); rc != NINFER_OK) return rc;
  v.query_loaded_resources = [](const void*, ninfer_kernel_resources* out, char* e, size_t e_len) {
    return query_kernel_attributes(K.kernel, K.symbol, K.threads, out, e, e_len);
  };
  v.query_driver_blocks_per_sm = [](const void*, size_t dyn, int32_t* blocks, char* e, size_t e_len) {
    return query_driver_blocks(K.kernel, K.threads, dyn, blocks, e, e_len);
  };
  return NINFER_OK;
}

// What a single-kernel form adds to describe_form: its shape hooks and its launch.
struct FormHooks {
  size_t (*dynamic_smem)(const void*, const ninfer_shape*);
  int32_t (*supports)(const void*, const ninfer_shape*);
  int32_t (*launch)(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len);
  size_t (*workspace)(const void*, const ninfer_shape*, int64_t tokens_in_launch) = nullptr;
};

// Registers kernel K's form: describe_form, the hooks, then the registrar. The variant lives in
// static storage owned by each instantiation (the core keeps the pointer).
template <const KernelInfo& K>
int32_t register_form(const ninfer_registrar* r, int32_t tokens_per_cta, int32_t split_k, const FormHooks& h,
                      char* err, size_t err_len) {
  static ninfer_variant v{};
  if (int32_t rc = describe_form<K>(tokens_per_cta, split_k, v, err, err_len); rc != NINFER_OK) return rc;
  v.dynamic_smem_bytes = h.dynamic_smem;
  v.workspace_bytes = h.workspace;
  v.supports = h.supports;
  v.launch = h.launch;
  return r->add_variant(r->ctx, &v);
}
#endif

// Cumulative log decay of one chunk: G[i] = g[0] + ... + g[i] for i < n, G[i] = G[n-1] past n
// (so every e^{G_i - G_j} stays finite), and beta (0 past n). Warp 0 only, two rows per lane;
// g and beta point at the chunk's first token of the head, `stride` apart. Both chunked forms.
__device__ inline void scan_decay(const float* g, const float* beta, int64_t stride, int n, float* G, float* B) {
  if (threadIdx.x >= 32) return;
  const int lane = threadIdx.x;
  float g0 = lane < n ? g[lane * stride] : 0.f;
  float g1 = lane + 32 < n ? g[(lane + 32) * stride] : 0.f;
  for (int off = 1; off < 32; off <<= 1) {
    const float y0 = __shfl_up_sync(0xffffffffu, g0, off);
    const float y1 = __shfl_up_sync(0xffffffffu, g1, off);
    if (lane >= off) {
      g0 += y0;
      g1 += y1;
    }
  }
  g1 += __shfl_sync(0xffffffffu, g0, 31);
  G[lane] = g0;
  G[lane + 32] = g1;
  B[lane] = lane < n ? beta[lane * stride] : 0.f;
  B[lane + 32] = lane + 32 < n ? beta[(lane + 32) * stride] : 0.f;
}

#ifndef __CUDACC_RTC__
// Writes a printf-style message to err and returns `status`.
int32_t fail(int32_t status, char* err, size_t err_len, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

// The Gated DeltaNet contracts' head rule (v_heads a positive multiple of k_heads: each key head
// serves a whole group of value heads). NINFER_OK, or NINFER_ERR_INVALID_ARGUMENT with "who: ...".
inline int32_t check_head_ratio(const char* who, int32_t k_heads, int32_t v_heads, char* err, size_t err_len) {
  if (k_heads > 0 && v_heads > 0 && v_heads % k_heads == 0) return NINFER_OK;
  return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "%s: v_heads %d is not a multiple of k_heads %d", who, v_heads,
              k_heads);
}

int32_t register_causal_conv1d(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_causal_conv1d_rows(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_gated_delta_rule_recurrent(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_gated_delta_rule_chunked(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_gated_delta_rule_chunked_parallel(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_conv_l2_norm(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_gated_delta_step(const ninfer_registrar* r, char* err, size_t err_len);
#endif

} // namespace ninfer::cuda_plugin::gated_deltanet
