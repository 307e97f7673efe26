// cp.async (sm_80 and newer): 16-byte copies from global to shared memory that a thread issues
// and waits for in commit groups, so loads stay in flight while the thread computes on earlier
// ones without holding registers for them.
#pragma once

#include <cuda_runtime.h>

namespace ninfer::cuda_plugin {

// 16 bytes global -> shared, through L2 only (data read once), with a 256-byte L2 prefetch hint.
__device__ __forceinline__ void cp_async16_stream(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}

// The same with the destination as a shared-space address (a warp's ring walked by offsets).
__device__ __forceinline__ void cp_async16_stream_shared(unsigned smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;\n" ::"r"(smem), "l"(gmem) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

} // namespace ninfer::cuda_plugin
