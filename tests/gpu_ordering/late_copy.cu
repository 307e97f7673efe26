#include <cuda_runtime.h>

#include "late_copy.hpp"

namespace ninfer::test {
namespace {

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One CTA: triggers the dependent launch first (the next kernel's CTAs may start and run up to
// their launch wait), sleeps, then copies the ranges byte by byte.
__global__ void late_copy_kernel(LateCopies c, long long delay_ns) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  if (threadIdx.x == 0) {
    const unsigned long long t0 = global_ns();
    while (global_ns() - t0 < static_cast<unsigned long long>(delay_ns)) __nanosleep(1000);
  }
  __syncthreads();
  for (int r = 0; r < c.count; ++r) {
    const char* src = static_cast<const char*>(c.range[r].src);
    char* dst = static_cast<char*>(c.range[r].dst);
    for (int64_t i = threadIdx.x; i < c.range[r].bytes; i += blockDim.x) dst[i] = src[i];
  }
}

} // namespace

int launch_late_copy(void* stream, const LateCopies& copies, long long delay_ns) {
  late_copy_kernel<<<1, 256, 0, static_cast<cudaStream_t>(stream)>>>(copies, delay_ns);
  return static_cast<int>(cudaGetLastError());
}

} // namespace ninfer::test
