// Host side of common/grid_dependency.cuh: the launch with programmatic stream serialization.
#include "common/grid_dependency.cuh"

#include "../../cuda_variant.hpp"
#include "common/cluster_launch.hpp"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

namespace ninfer::cuda_plugin {

#if NINFER_RUNTIME_RESOURCES
// cuda-generic/nvrtc_kernels.cpp: the NVRTC-compiled kernels, when that path is active.
const void* generic_kernel_entry(const void* kernel);
bool generic_kernels_have_prologue();
#endif

namespace {

// The kernels carry the prologue only when compiled to machine code for 9.0+: an exact plugin
// for such a card, or cuda-generic's NVRTC kernels on one (its compute_80 PTX has none).
bool kernels_have_prologue() {
#if NINFER_RUNTIME_RESOURCES
  return generic_kernels_have_prologue();
#elif defined(NINFER_KERNELS_CC_MAJOR) && NINFER_KERNELS_CC_MAJOR >= 9
  return true;
#else
  return false;
#endif
}

// A launch feature the kernels carry (machine code for 9.0+), unless the environment variable
// `off` is 0: NINFER_PDL and NINFER_DECODE_CLUSTER, A/B switches for benchmarks and diagnostics
// for suspected races.
bool feature_enabled(const char* off) {
  if (!kernels_have_prologue()) return false;
  const char* env = std::getenv(off);
  return !(env && std::strcmp(env, "0") == 0);
}

} // namespace

bool programmatic_launch_enabled() {
  static const bool enabled = feature_enabled("NINFER_PDL");
  return enabled;
}

namespace {
// Asks the kernel to accept clusters of `cluster_y` (sizes above 8 are non-portable) and adds the
// cluster attribute to `config`.
cudaError_t add_cluster(const void* entry, unsigned cluster_y, cudaLaunchConfig_t& config,
                        cudaLaunchAttribute& attribute) {
  if (cluster_y > 8)
    if (cudaError_t rc = cudaFuncSetAttribute(entry, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
        rc != cudaSuccess)
      return rc;
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = 1;
  attribute.val.clusterDim.y = cluster_y;
  attribute.val.clusterDim.z = 1;
  config.numAttrs++;
  return cudaSuccess;
}

// Both launches: with programmatic serialization (or cooperative), in clusters when cluster_y > 1.
cudaError_t launch(const void* kernel, dim3 grid, dim3 block, void** params, size_t dynamic_smem,
                   cudaStream_t stream, bool cooperative, unsigned cluster_y) {
  const void* entry = device_entry(kernel);
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = dynamic_smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[2];
  config.attrs = attribute;
  if (cooperative) {
    attribute[0].id = cudaLaunchAttributeCooperative;
    attribute[0].val.cooperative = 1;
    config.numAttrs = 1;
  } else if (programmatic_launch_enabled()) {
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    config.numAttrs = 1;
  }
  if (cluster_y > 1)
    if (cudaError_t rc = add_cluster(entry, cluster_y, config, attribute[config.numAttrs]); rc != cudaSuccess)
      return rc;
  return cudaLaunchKernelExC(&config, entry, params);
}
} // namespace

cudaError_t launch_kernel(const void* kernel, dim3 grid, dim3 block, void** params, size_t dynamic_smem,
                          cudaStream_t stream, bool cooperative) {
  return launch(kernel, grid, block, params, dynamic_smem, stream, cooperative, 1);
}

cudaError_t launch_kernel_in_clusters(const void* kernel, dim3 grid, dim3 block, void** params,
                                      size_t dynamic_smem, cudaStream_t stream, unsigned cluster_y) {
  return launch(kernel, grid, block, params, dynamic_smem, stream, false, cluster_y);
}

bool cluster_launch_enabled() {
  static const bool enabled = feature_enabled("NINFER_DECODE_CLUSTER");
  return enabled;
}

namespace {
// A device query about one kernel's launch shape, asked once per (device, kernel, shape): the
// launch paths ask it for every call of a recorded step. `cluster_y` is 1 for queries without
// clusters.
using DeviceQuery = int (*)(const void* kernel, unsigned cluster_y, dim3 block, size_t dynamic_smem);
int cached_query(const void* kernel, unsigned cluster_y, dim3 block, size_t dynamic_smem, DeviceQuery ask) {
  struct Key {
    int device;
    const void* kernel;
    DeviceQuery ask;
    unsigned cluster_y, threads;
    size_t smem;
    bool operator<(const Key& o) const {
      return std::tie(device, kernel, ask, cluster_y, threads, smem) <
             std::tie(o.device, o.kernel, o.ask, o.cluster_y, o.threads, o.smem);
    }
  };
  static std::mutex mutex;
  static std::map<Key, int> known;
  int device = 0;
  cudaGetDevice(&device);
  const Key key{device, kernel, ask, cluster_y, block.x * block.y * block.z, dynamic_smem};
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find(key); it != known.end()) return it->second;
  const int answer = ask(kernel, cluster_y, block, dynamic_smem);
  cudaGetLastError(); // a refused query leaves a non-sticky error; the caller falls back
  return known[key] = answer;
}

int ask_active_clusters(const void* kernel, unsigned cluster_y, dim3 block, size_t dynamic_smem) {
  const void* entry = device_entry(kernel);
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(1, cluster_y);
  config.blockDim = block;
  config.dynamicSmemBytes = dynamic_smem;
  cudaLaunchAttribute attribute;
  config.attrs = &attribute;
  int clusters = 0;
  if (set_max_dynamic_smem(kernel, dynamic_smem) != cudaSuccess ||
      add_cluster(entry, cluster_y, config, attribute) != cudaSuccess ||
      cudaOccupancyMaxActiveClusters(&clusters, entry, &config) != cudaSuccess)
    clusters = 0;
  return clusters;
}

int ask_resident_ctas(const void* kernel, unsigned, dim3 block, size_t dynamic_smem) {
  int device = 0, sms = 0, per_sm = 0;
  char err[160];
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      query_driver_blocks(kernel, static_cast<int32_t>(block.x * block.y * block.z), dynamic_smem, &per_sm, err,
                          sizeof err) != NINFER_OK)
    return 0;
  return sms * per_sm;
}
} // namespace

int max_active_clusters(const void* kernel, unsigned cluster_y, dim3 block, size_t dynamic_smem) {
  return cached_query(kernel, cluster_y, block, dynamic_smem, ask_active_clusters);
}

int resident_ctas(const void* kernel, dim3 block, size_t dynamic_smem) {
  return cached_query(kernel, 1, block, dynamic_smem, ask_resident_ctas);
}

const void* device_entry(const void* kernel) {
#if NINFER_RUNTIME_RESOURCES
  return generic_kernel_entry(kernel);
#else
  return kernel;
#endif
}

cudaError_t set_max_dynamic_smem(const void* kernel, size_t bytes) {
  return cudaFuncSetAttribute(device_entry(kernel), cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(bytes));
}

} // namespace ninfer::cuda_plugin
