// Programmatic dependent launch (Hopper and newer): how consecutive kernels of a step overlap.
//
// A decode step is ~450 dependent launches, most of them tiny (norms, RoPE, KV append). Without
// help, each one starts only after the previous grid has fully drained and its completion has
// travelled back to the front end: a few microseconds per launch, a third of a step. With
// programmatic stream serialization, the next grid is launched as soon as every CTA of the
// previous one has *started* (griddepcontrol.launch_dependents), its CTAs are placed on free SM
// slots, and they block in griddepcontrol.wait until the previous grid has completed and its
// memory is visible. The launch latency and the CTA ramp-up hide behind the previous kernel.
//
// The rule that keeps this correct: every kernel launched with the attribute calls
// grid_dependency_prologue() as its FIRST statement, before any global memory access and before
// any early return. The exception: reads of memory that the previous kernel cannot be writing.
// When kernel N runs ahead of its wait, kernel N-1 may still run, but N-2 has completed (N-1
// triggered the launch only after its own wait). So a kernel may read before its wait what no
// kernel of the step writes: weights (decode GEMVs' L2 prefetch hints, linear/linear_gemv_warp.cu; the first codes
// gemv_int4_lean loads, linear/linear_gemv_int4_lean.cu);
// the step's batch arrays, uploaded before the step by a copy the host waits for; and the KV rows
// before each sequence's first position in the call, which only earlier steps wrote (the
// tensor-core split-KV decode attention, attention/decode_mma.cuh). Then "grid N completed" implies
// "grid N-1 completed" (N waited for it), so dependencies stay transitive across the whole stream.
// Kernels that do not follow the rule (library kernels: cuBLASLt) are launched without the
// attribute, which is always safe.
#pragma once

#include <cuda_runtime.h>

namespace ninfer::cuda_plugin {

__device__ __forceinline__ void grid_dependency_prologue() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

#ifndef __CUDACC_RTC__ // host side; NVRTC compiles device code only (cuda-generic, docs/plugins.md)
// Launches `kernel` on `stream`, with programmatic stream serialization when this plugin's
// kernels were compiled with the prologue above (machine code for compute capability 9.0 or
// newer) and NINFER_PDL is not 0. cuda-generic (compute_80 PTX) never uses it: its kernels have
// no griddepcontrol instructions even when the driver compiles them for a Hopper card.
// `cooperative` (a grid barrier inside the kernel) launches with co-residency guaranteed and
// without the early start: all its CTAs must be resident at once, and CTAs parked behind the
// previous grid would only delay that.
cudaError_t launch_kernel(const void* kernel, dim3 grid, dim3 block, void** params, size_t dynamic_smem,
                          cudaStream_t stream, bool cooperative = false);

// Whether launch_kernel adds the attribute (for ninfer-bench's report and the tests).
bool programmatic_launch_enabled();

// The handle the CUDA runtime is given for `kernel` (a kernel's host stub): the stub itself, or
// in cuda-generic the NVRTC-compiled twin of that kernel (a cudaKernel_t) when it runs those.
// Every runtime call on a kernel (launch, attributes, occupancy) goes through it.
const void* device_entry(const void* kernel);

// cudaFuncSetAttribute(MaxDynamicSharedMemorySize) on the device entry of `kernel`.
cudaError_t set_max_dynamic_smem(const void* kernel, size_t bytes);

// How many CTAs of `kernel` with this block and dynamic shared memory the current device holds
// at once (SMs x the occupancy query), cached per device and kernel; 0 when the query fails.
// The one-wave kernels (linear/row_pair_one_wave.cuh) size their grids with it.
int resident_ctas(const void* kernel, dim3 block, size_t dynamic_smem);
#endif

} // namespace ninfer::cuda_plugin
