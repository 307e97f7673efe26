// Registration of the prefill-form attention kernels: ordinary launches, grid = token tiles x
// heads (grid.z), each CTA a fixed number of consecutive tokens of one query head. The float32
// prefill (attention/prefill.cu) and the tensor-core prefill (attention/prefill_mma.cu) are both
// registered this way; only their kernel tables differ. Each variant has one kernel per cache
// dtype (float32, float16, bfloat16: kv_dtype_index; the compact formats, where the family has
// kernels for them: kv_compact_index) and launches the call's. Host code for .cu files.
#pragma once

#include <cstdio>
#include <utility>

#include "../build_resources.hpp"
#include "../../cuda_variant.hpp"
#include "attention/host.hpp"
#include "attention/shapes.hpp"

namespace ninfer::cuda_plugin::attention {

// One prefill variant: its kernels (one per cache dtype, same block and shared memory).
struct PrefillKernel {
  int hd;             // head-dim class it serves
  int threads;        // per CTA
  int tokens_per_cta;
  size_t smem;        // dynamic shared memory per CTA
  const char* name;   // variant name
  const char* symbols[kKvDtypeCount]; // the kernels' symbols in the build resource table
  Kernel kernels[kKvDtypeCount];
  const char* compact_symbols[kKvCompactCount]; // int8, fp8, int4r; null: the family reads none
  Kernel compact[kKvCompactCount];

  bool reads_compact() const { return compact[0] != nullptr; }
  // The kernel of a cache dtype (null: none).
  Kernel kernel_for(int32_t dtype) const {
    const int d = kv_dtype_index(dtype), c = kv_compact_index(dtype);
    return d >= 0 ? kernels[d] : c >= 0 ? compact[c] : nullptr;
  }
};

// The variant functions of kernel V of a family's table. The ABI's function pointers carry no
// context, so each variant is its own instantiation.
template <const PrefillKernel* (*Table)(), int V>
struct PrefillVariant {
  // The kernel (kernel_at) that needs the most registers: its resources are the variant's, and
  // the live-resource queries read it. Set at registration.
  static inline int planned = 0;
  static const PrefillKernel& k() { return Table()[V]; }
  static size_t dyn_smem(const void*, const ninfer_shape*) { return k().smem; }
  static size_t workspace(const void*, const ninfer_shape* s, int64_t) { return workspace_bytes(*s); }
  static int32_t supports(const void*, const ninfer_shape* s) {
    return basic_shape_ok(*s, k().hd) && cache_dtype_ok(*s, k().reads_compact());
  }

  static int32_t launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
    const PrefillKernel& d = k();
    const auto& a = *static_cast<const ninfer_attention_args*>(args);
    if (int32_t rc = check_args(a, *l, d.hd, d.reads_compact(), d.name, err, err_len); rc != NINFER_OK) return rc;
    if (l->grid_x < 1 || l->grid_y != 1 || a.heads > 65535) {
      std::snprintf(err, err_len, "attention/%s: grid (%d,%d) x %d heads is not a prefill grid (grid.y must be 1, "
                    "heads at most 65535)", d.name, l->grid_x, l->grid_y, a.heads);
      return NINFER_ERR_INVALID_ARGUMENT;
    }
    return launch_kernel(d.kernel_for(a.cache.dtype), dim3(l->grid_x, 1, a.heads), d.threads, a, *l,
                         false, stream, d.name, err, err_len);
  }

  // Kernel i of the variant: the cache dtypes' (kv_dtype_index), then the compact formats'.
  static Kernel kernel_at(int i) {
    return i < kKvDtypeCount ? k().kernels[i] : k().compact[i - kKvDtypeCount];
  }
  static const char* symbol_at(int i) {
    return i < kKvDtypeCount ? k().symbols[i] : k().compact_symbols[i - kKvDtypeCount];
  }

  static int32_t query(const void*, ninfer_kernel_resources* out, char* err, size_t err_len) {
    return query_kernel_attributes(reinterpret_cast<const void*>(kernel_at(planned)), symbol_at(planned),
                                   k().threads, out, err, err_len);
  }

  static int32_t driver_blocks(const void*, size_t dyn, int32_t* blocks, char* err, size_t err_len) {
    return query_driver_blocks(reinterpret_cast<const void*>(kernel_at(planned)), k().threads, dyn, blocks, err,
                               err_len);
  }

  // Finds the kernels in the build resource table and fills v.resources from the planned one.
  static int32_t set_resources(ninfer_variant& v, char* err, size_t err_len) {
    const BuildResource* best = nullptr;
    for (int d = 0; d < kKvDtypeCount + kKvCompactCount; ++d) {
      if (!kernel_at(d)) continue; // a family without compact kernels
      const BuildResource* res = find_build_resource(symbol_at(d));
      if (!res) {
        std::snprintf(err, err_len, "attention/%s: kernel %s missing from the build resource table", k().name,
                      symbol_at(d));
        return NINFER_ERR_UNSUPPORTED;
      }
      if (!best || res->registers > best->registers) {
        best = res;
        planned = d;
      }
    }
    v.resources = make_resources(*best, k().threads);
    return NINFER_OK;
  }

  static void fill(ninfer_variant& v) {
    v.op = NINFER_OP_ATTENTION;
    v.name = k().name;
    v.exec = NINFER_EXEC_CUDA;
    v.geometry = NINFER_GEOMETRY_TOKEN_TILED;
    v.cooperative = 0;
    v.split_k = 1;
    v.tokens_per_cta = k().tokens_per_cta;
    v.dtype_mask = kKvDtypeMask | (k().reads_compact() ? kKvCompactMask : 0u);
    v.dynamic_smem_bytes = dyn_smem;
    v.workspace_bytes = workspace;
    v.supports = supports;
    v.launch = launch;
    v.query_loaded_resources = query;
    v.query_driver_blocks_per_sm = driver_blocks;
  }
};

// Registers every kernel of Table (N of them), in table order (the planner keeps the first of
// equally good variants), each with its build-time resources.
template <const PrefillKernel* (*Table)(), int... V>
int32_t register_prefill_kernels(const ninfer_registrar* r, char* err, size_t err_len,
                                 std::integer_sequence<int, V...>) {
  static ninfer_variant variants[sizeof...(V)];
  (PrefillVariant<Table, V>::fill(variants[V]), ...);
  int32_t rc = NINFER_OK;
  ((rc = rc == NINFER_OK ? PrefillVariant<Table, V>::set_resources(variants[V], err, err_len) : rc), ...);
  for (size_t i = 0; rc == NINFER_OK && i < sizeof...(V); ++i) rc = r->add_variant(r->ctx, &variants[i]);
  return rc;
}

} // namespace ninfer::cuda_plugin::attention
