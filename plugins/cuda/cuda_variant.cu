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

} // namespace ninfer::cuda_plugin
