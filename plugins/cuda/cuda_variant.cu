#include "cuda_variant.hpp"
#include "kernels/common/grid_dependency.cuh"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

namespace ninfer::cuda_plugin {

#if !NINFER_RUNTIME_RESOURCES
// Exact-architecture plugins: the table ptxas wrote at build time. (cuda-generic, which has no
// machine code at build time, reads its kernels' resources on the device instead:
// plugins/cuda-generic/runtime_resources.cpp.)
const BuildResource* find_build_resource(const char* symbol) {
  for (std::size_t i = 0; i < kBuildResourceCount; ++i)
    if (std::strcmp(kBuildResources[i].symbol, symbol) == 0) return &kBuildResources[i];
  return nullptr;
}
#endif

ninfer_kernel_resources make_resources(const BuildResource& r, int32_t threads_per_block) {
  ninfer_kernel_resources out{};
  out.symbol = r.symbol;
  out.threads_per_block = threads_per_block;
  out.registers_per_thread = r.registers;
  out.static_smem_bytes = r.shared_bytes;
  out.local_bytes_per_thread = r.local_bytes;
  out.max_threads_per_block = threads_per_block; // every kernel declares __launch_bounds__(threads)
  return out;
}

int32_t query_kernel_attributes(const void* kernel, const char* symbol, int32_t threads_per_block,
                                ninfer_kernel_resources* out, char* err, size_t err_len) {
  cudaFuncAttributes attr{};
  if (cudaError_t rc = cudaFuncGetAttributes(&attr, device_entry(kernel)); rc != cudaSuccess) {
    std::snprintf(err, err_len, "cudaFuncGetAttributes(%s): %s", symbol, cudaGetErrorString(rc));
    return NINFER_ERR_LAUNCH;
  }
  *out = ninfer_kernel_resources{};
  out->symbol = symbol;
  out->threads_per_block = threads_per_block;
  out->registers_per_thread = attr.numRegs;
  out->static_smem_bytes = static_cast<int32_t>(attr.sharedSizeBytes);
  out->local_bytes_per_thread = static_cast<int32_t>(attr.localSizeBytes);
  out->max_threads_per_block = attr.maxThreadsPerBlock;
  return NINFER_OK;
}

int32_t query_driver_blocks(const void* kernel, int32_t threads_per_block, size_t dynamic_smem, int32_t* blocks,
                            char* err, size_t err_len) {
  cudaError_t rc = set_max_dynamic_smem(kernel, dynamic_smem);
  int n = 0;
  if (rc == cudaSuccess)
    rc = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, device_entry(kernel), threads_per_block, dynamic_smem);
  if (rc != cudaSuccess) {
    std::snprintf(err, err_len, "occupancy query (%d threads, %zu B dynamic smem): %s", threads_per_block,
                  dynamic_smem, cudaGetErrorString(rc));
    cudaGetLastError();
    return NINFER_ERR_LAUNCH;
  }
  *blocks = n;
  return NINFER_OK;
}

namespace {
int32_t helper_resources(const void* ctx, ninfer_kernel_resources* out, char* err, size_t err_len) {
  const auto& h = *static_cast<const LibraryHelper*>(ctx);
  return query_kernel_attributes(h.kernel, h.symbol, h.threads, out, err, err_len);
}
int32_t helper_blocks(const void* ctx, size_t dynamic_smem, int32_t* blocks, char* err, size_t err_len) {
  const auto& h = *static_cast<const LibraryHelper*>(ctx);
  return query_driver_blocks(h.kernel, h.threads, dynamic_smem, blocks, err, err_len);
}
} // namespace

int32_t add_library_variant(const ninfer_registrar* r, ninfer_variant& v, const LibraryVariant& spec,
                            const LibraryHelper& helper, char* err, size_t err_len) {
  const BuildResource* res = find_build_resource(helper.symbol);
  if (!res) {
    std::snprintf(err, err_len, "%s/%s: kernel %s missing from the build resource table", spec.op, spec.name,
                  helper.symbol);
    return NINFER_ERR_UNSUPPORTED;
  }
  v = ninfer_variant{};
  v.op = spec.op;
  v.name = spec.name;
  v.ctx = &helper;
  v.exec = NINFER_EXEC_CUDA;
  v.geometry = NINFER_GEOMETRY_LIBRARY;
  v.split_k = 1;
  v.tokens_per_cta = 1;
  v.dtype_mask = spec.dtype_mask;
  v.resources = make_resources(*res, helper.threads);
  v.workspace_bytes = spec.workspace_bytes;
  v.supports = spec.supports;
  v.launch = spec.launch;
  v.query_loaded_resources = helper_resources;
  v.query_driver_blocks_per_sm = helper_blocks;
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cuda_plugin
