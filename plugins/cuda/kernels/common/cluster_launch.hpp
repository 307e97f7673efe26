// Host side: launches in thread block clusters (sm_90 and newer), for kernels written for them
// (the tensor-core split-KV decode, attention/decode_cluster.cuh). Defined in
// common/grid_dependency.cu, next to the launch it extends.
#pragma once

#include <cuda_runtime.h>

namespace ninfer::cuda_plugin {

// Whether this plugin's kernels may be launched in clusters: machine code for compute capability
// 9.0 or newer (cuda-generic's compute_80 PTX has no cluster instructions), unless
// NINFER_DECODE_CLUSTER is 0 (an A/B switch).
bool cluster_launch_enabled();

// How many (1, cluster_y, 1) clusters of `kernel` with this block and shared memory the device
// can hold at once (0: none, a launch would fail). Asked of the driver once per combination.
int max_active_clusters(const void* kernel, unsigned cluster_y, dim3 block, size_t dynamic_smem);

// launch_kernel (common/grid_dependency.cuh) in clusters of (1, cluster_y, 1) CTAs; non-portable
// sizes above 8 are first allowed on the kernel. cluster_y 1 is launch_kernel itself.
cudaError_t launch_kernel_in_clusters(const void* kernel, dim3 grid, dim3 block, void** params,
                                      size_t dynamic_smem, cudaStream_t stream, unsigned cluster_y);

} // namespace ninfer::cuda_plugin
