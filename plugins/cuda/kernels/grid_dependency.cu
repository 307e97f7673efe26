// Host side of grid_dependency.cuh: the launch with programmatic stream serialization.
#include "grid_dependency.cuh"

#include <cstdlib>
#include <cstring>

namespace ninfer::cuda_plugin {
namespace {

// The kernels of this plugin carry the prologue only when compiled to machine code for 9.0+.
#if !NINFER_RUNTIME_RESOURCES && defined(NINFER_KERNELS_CC_MAJOR) && NINFER_KERNELS_CC_MAJOR >= 9
constexpr bool kKernelsHavePrologue = true;
#else
constexpr bool kKernelsHavePrologue = false;
#endif

bool decide() {
  if (!kKernelsHavePrologue) return false;
  // NINFER_PDL=0 turns it off: an A/B switch for benchmarks and a diagnostic for suspected races.
  const char* env = std::getenv("NINFER_PDL");
  return !(env && std::strcmp(env, "0") == 0);
}

} // namespace

bool programmatic_launch_enabled() {
  static const bool enabled = decide();
  return enabled;
}

cudaError_t launch_kernel(const void* kernel, dim3 grid, dim3 block, void** params, size_t dynamic_smem,
                          cudaStream_t stream, bool cooperative) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = dynamic_smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  if (cooperative) {
    attribute[0].id = cudaLaunchAttributeCooperative;
    attribute[0].val.cooperative = 1;
    config.attrs = attribute;
    config.numAttrs = 1;
  } else if (programmatic_launch_enabled()) {
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attribute;
    config.numAttrs = 1;
  }
  return cudaLaunchKernelExC(&config, kernel, params);
}

} // namespace ninfer::cuda_plugin
