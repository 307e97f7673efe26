// Host side of grid_dependency.cuh: the launch with programmatic stream serialization.
#include "grid_dependency.cuh"

#include <cstdlib>
#include <cstring>

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

bool decide() {
  if (!kernels_have_prologue()) return false;
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
  return cudaLaunchKernelExC(&config, device_entry(kernel), params);
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
