#include "ninfer/planning/occupancy.hpp"

#include <cuda_occupancy.h>
#include <fmt/format.h>

#include <algorithm>

namespace ninfer {

Occupancy occupancy(const ninfer_kernel_resources& k, size_t dynamic_smem,
                    const ninfer_device_info& d) {
  Occupancy out;
  cudaOccDeviceProp prop;
  prop.computeMajor = d.cc_major;
  prop.computeMinor = d.cc_minor;
  prop.maxThreadsPerBlock = d.max_threads_per_block;
  prop.maxThreadsPerMultiprocessor = d.max_threads_per_sm;
  prop.regsPerBlock = d.regs_per_block;
  prop.regsPerMultiprocessor = d.regs_per_sm;
  prop.warpSize = d.warp_size;
  prop.sharedMemPerBlock = static_cast<size_t>(d.smem_per_block);
  prop.sharedMemPerMultiprocessor = static_cast<size_t>(d.smem_per_sm);
  prop.numSms = d.sm_count;
  prop.sharedMemPerBlockOptin = static_cast<size_t>(d.smem_per_block_optin);
  prop.reservedSharedMemPerBlock = static_cast<size_t>(d.reserved_smem_per_block);

  cudaOccFuncAttributes attr;
  attr.maxThreadsPerBlock = k.max_threads_per_block;
  attr.numRegs = k.registers_per_thread;
  attr.sharedSizeBytes = static_cast<size_t>(k.static_smem_bytes);
  attr.partitionedGCConfig = PARTITIONED_GC_OFF;
  // Every launch raises the kernel's dynamic limit to what it needs (opt-in), as the
  // variants' launch functions do with cudaFuncSetAttribute.
  attr.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
  attr.maxDynamicSharedSizeBytes = dynamic_smem;
  attr.numBlockBarriers = 1;
  attr.virtualResourceCount = 0;

  cudaOccDeviceState state;
  cudaOccResult result;
  const cudaOccError rc = cudaOccMaxActiveBlocksPerMultiprocessor(&result, &prop, &attr, &state,
                                                                  k.threads_per_block, dynamic_smem);
  if (rc != CUDA_OCC_SUCCESS) {
    out.limiter = rc == CUDA_OCC_ERROR_UNKNOWN_DEVICE ? "unknown compute capability"
                                                      : "configuration exceeds a per-block limit";
    return out;
  }
  out.blocks_per_sm = result.activeBlocksPerMultiprocessor;
  out.residency = static_cast<int64_t>(out.blocks_per_sm) * d.sm_count;
  const int lim = result.limitingFactors;
  if (out.blocks_per_sm == 0) {
    out.limiter = "does not fit on one SM";
  } else if (lim & OCC_LIMIT_REGISTERS) {
    out.limiter = "registers";
  } else if (lim & OCC_LIMIT_SHARED_MEMORY) {
    out.limiter = "shared memory";
  } else if (lim & OCC_LIMIT_WARPS) {
    out.limiter = "threads";
  } else if (lim & OCC_LIMIT_BLOCKS) {
    out.limiter = "blocks per SM";
  } else {
    out.limiter = "none";
  }
  return out;
}

double wave_efficiency(int64_t ctas, int64_t residency) {
  if (ctas <= 0 || residency <= 0) return 0.0;
  const int64_t waves = (ctas + residency - 1) / residency;
  return static_cast<double>(ctas) / static_cast<double>(waves * residency);
}

} // namespace ninfer
