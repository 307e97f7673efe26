// The boilerplate of one CUDA variant whose kernel covers a launch's token range: its launch,
// the live-resource and residency queries, and its registration from the build-time resource
// table. A variant is described by a definition struct D deriving from TokenDefDefaults:
//
//   struct D : TokenDefDefaults {
//     using Args = ninfer_<op>_args;
//     static constexpr const char* op = ...;        // op contract name
//     static constexpr const char* name = ...;      // variant name
//     static constexpr int threads = ...;           // block size = the kernel's __launch_bounds__
//     static KernelPair kernels();                  // f32 kernel and, if any, the bf16 one
//     static int32_t supports(const void* ctx, const ninfer_shape*);
//     // and, where the defaults do not fit: tokens_per_cta, split_k, geometry, dtype_mask,
//     // dynamic_smem(const void* ctx, const ninfer_shape*), dtype(const Args&), grid(const Args&, const ninfer_launch&),
//     // invalid(const Args&, const ninfer_launch&) (a message when the arguments break the contract, else nullptr),
//     // kernel(const Args&) (a kernel other than the pair's for these arguments, else nullptr)
//   };
//
// Kernels take (Args, int64_t token_begin, int64_t token_end). None is cooperative.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdio>

#include "../../cuda_variant.hpp"
#include "common/grid_dependency.cuh"

namespace ninfer::cuda_plugin {

using TokenKernel = const void*;

// The compiled kernel(s) of a variant: one per weight dtype, or one (bf16 null) for f32 ops.
struct KernelPair {
  const char* symbol_f32;
  TokenKernel f32;
  const char* symbol_bf16;
  TokenKernel bf16;
};

// The planner's grid as the CUDA grid: token tiles on x, split_k on y.
inline dim3 planned_grid(const ninfer_launch& l) {
  return dim3(static_cast<unsigned>(l.grid_x), static_cast<unsigned>(l.grid_y));
}

inline constexpr uint32_t kF32Mask = 1u << NINFER_DTYPE_F32;
inline constexpr uint32_t kF32OrBf16Mask = (1u << NINFER_DTYPE_F32) | (1u << NINFER_DTYPE_BF16);

// One token per tile, grid-stride over tiles, no split, float32 only, no dynamic shared
// memory, and the planner's grid as is.
struct TokenDefDefaults {
  static constexpr int tokens_per_cta = 1;
  static constexpr int split_k = 1;
  static constexpr int32_t geometry = NINFER_GEOMETRY_TOKEN_TILED_GRID_STRIDE;
  static constexpr uint32_t dtype_mask = kF32Mask;
  static constexpr std::nullptr_t dynamic_smem = nullptr;
  template <class Args>
  static int32_t dtype(const Args&) { return NINFER_DTYPE_F32; }
  template <class Args>
  static dim3 grid(const Args&, const ninfer_launch& l) { return planned_grid(l); }
  template <class Args>
  static const char* invalid(const Args&, const ninfer_launch&) { return nullptr; }
  // A kernel other than the pair's for these arguments (e.g. a fallback for shapes the fast
  // kernel cannot take), or nullptr for the pair's kernel of the dtype.
  template <class Args>
  static TokenKernel kernel(const Args&) { return nullptr; }
};

template <class D>
struct TokenVariant {
  // The kernel whose resources the variant reports (the one needing more registers, so a plan
  // is legal for either dtype); chosen at registration.
  static inline TokenKernel planned = nullptr;
  static inline const char* planned_symbol = nullptr;

  static TokenKernel kernel_for(int32_t dtype) {
    return dtype == NINFER_DTYPE_BF16 && D::kernels().bf16 ? D::kernels().bf16 : D::kernels().f32;
  }

  static int32_t launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
    typename D::Args a = *static_cast<const typename D::Args*>(args);
    if (const char* why = D::invalid(a, *l)) {
      std::snprintf(err, err_len, "%s/%s: %s", D::op, D::name, why);
      return NINFER_ERR_INVALID_ARGUMENT;
    }
    int64_t b = l->token_begin, e = l->token_end;
    const TokenKernel special = D::kernel(a);
    const TokenKernel k = special ? special : kernel_for(D::dtype(a));
    const dim3 grid = D::grid(a, *l);
    cudaError_t rc = cudaSuccess;
    // Raise the kernel's dynamic shared memory limit to what this launch uses: the limit is
    // per kernel, and a residency query may have left it lower.
    if (l->dynamic_smem_bytes > 0)
      rc = set_max_dynamic_smem(k, l->dynamic_smem_bytes);
    if (rc == cudaSuccess) {
      void* params[] = {&a, &b, &e};
      rc = launch_kernel(k, grid, dim3(l->block), params, l->dynamic_smem_bytes,
                            static_cast<cudaStream_t>(stream));
    }
    if (rc != cudaSuccess) {
      std::snprintf(err, err_len, "%s/%s: launch grid (%u,%u) block %d smem %zu tokens [%lld,%lld): %s", D::op,
                    D::name, grid.x, grid.y, l->block, l->dynamic_smem_bytes, static_cast<long long>(b),
                    static_cast<long long>(e), cudaGetErrorString(rc));
      cudaGetLastError(); // a failed launch must not poison the next call's error check
      return NINFER_ERR_LAUNCH;
    }
    return NINFER_OK;
  }

  static int32_t query(const void*, ninfer_kernel_resources* out, char* err, size_t err_len) {
    return query_kernel_attributes(planned, planned_symbol, D::threads, out, err, err_len);
  }

  static int32_t driver_blocks(const void*, size_t dyn, int32_t* blocks, char* err, size_t err_len) {
    return query_driver_blocks(planned, D::threads, dyn, blocks, err, err_len);
  }

  // Fills `v` (static storage: the core keeps the pointer) and registers it.
  static int32_t add(const ninfer_registrar* r, ninfer_variant& v, char* err, size_t err_len) {
    const BuildResource* f32 = find_build_resource(D::kernels().symbol_f32);
    const BuildResource* bf16 = D::kernels().bf16 ? find_build_resource(D::kernels().symbol_bf16) : nullptr;
    if (!f32 || (D::kernels().bf16 && !bf16)) {
      std::snprintf(err, err_len, "%s/%s: kernel missing from the build resource table", D::op, D::name);
      return NINFER_ERR_UNSUPPORTED;
    }
    const bool use_bf16 = bf16 && bf16->registers > f32->registers;
    planned = use_bf16 ? D::kernels().bf16 : D::kernels().f32;
    planned_symbol = use_bf16 ? D::kernels().symbol_bf16 : D::kernels().symbol_f32;
    v = ninfer_variant{};
    v.op = D::op;
    v.name = D::name;
    v.exec = NINFER_EXEC_CUDA;
    v.geometry = D::geometry;
    v.cooperative = 0;
    v.split_k = D::split_k;
    v.tokens_per_cta = D::tokens_per_cta;
    v.dtype_mask = D::dtype_mask;
    v.resources = make_resources(use_bf16 ? *bf16 : *f32, D::threads);
    v.dynamic_smem_bytes = D::dynamic_smem;
    v.workspace_bytes = nullptr;
    v.supports = D::supports;
    v.launch = launch;
    v.query_loaded_resources = query;
    v.query_driver_blocks_per_sm = driver_blocks;
    return r->add_variant(r->ctx, &v);
  }
};

// Registers each variant definition in order; stops at the first failure.
template <class... Ds>
int32_t add_token_variants(const ninfer_registrar* r, char* err, size_t err_len) {
  static ninfer_variant storage[sizeof...(Ds)];
  int i = 0;
  int32_t rc = NINFER_OK;
  ((rc = rc == NINFER_OK ? TokenVariant<Ds>::add(r, storage[i++], err, err_len) : rc), ...);
  return rc;
}

} // namespace ninfer::cuda_plugin
