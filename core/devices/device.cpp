#include "ninfer/devices/device.hpp"

#include "ninfer/support/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#ifdef NINFER_WITH_CUDA_RUNTIME
#include <cuda_runtime_api.h>
#endif

namespace ninfer {

ninfer_device_info host_device() {
  ninfer_device_info d{};
  d.kind = NINFER_DEVICE_CPU;
  d.ordinal = -1;
  // The threads the CPU plugin will use (it reads the same variable; --threads sets it).
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  if (const char* s = std::getenv("NINFER_CPU_THREADS"); s && std::atoi(s) >= 1)
    threads = static_cast<unsigned>(std::min(std::atoi(s), 256));
  std::snprintf(d.name, sizeof d.name, "host CPU (%u threads)", threads);
  std::snprintf(d.arch, sizeof d.arch, "cpu");
  return d;
}

Discovery discover_devices() {
  Discovery out;
#ifdef NINFER_WITH_CUDA_RUNTIME
  cudaDriverGetVersion(&out.driver_version);
  cudaRuntimeGetVersion(&out.runtime_version);
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    // Said as what the user has, not as the runtime's code: "insufficient driver" with no
    // driver at all reads as "update the driver" when the fix is --device cpu.
    if (rc == cudaErrorInsufficientDriver && out.driver_version == 0)
      out.note = "no NVIDIA GPU found (no NVIDIA driver is loaded)";
    else if (rc == cudaErrorInsufficientDriver)
      out.note = fmt::format("no usable NVIDIA GPU: the driver supports CUDA {}.{}, this build needs {}.{} (update "
                             "the driver)",
                             out.driver_version / 1000, out.driver_version % 1000 / 10, out.runtime_version / 1000,
                             out.runtime_version % 1000 / 10);
    else if (rc == cudaErrorNoDevice)
      out.note = "no NVIDIA GPU found (the driver reports none)";
    else
      out.note = fmt::format("no usable NVIDIA GPU ({})", cudaGetErrorString(rc));
    cudaGetLastError(); // clear the sticky-free error so later calls start clean
    return out;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    ninfer_device_info d{};
    d.kind = NINFER_DEVICE_CUDA;
    d.ordinal = i;
    std::snprintf(d.name, sizeof d.name, "%s", p.name);
    std::snprintf(d.arch, sizeof d.arch, "sm_%d%d", p.major, p.minor);
    d.cc_major = p.major;
    d.cc_minor = p.minor;
    d.sm_count = p.multiProcessorCount;
    d.regs_per_sm = p.regsPerMultiprocessor;
    d.regs_per_block = p.regsPerBlock;
    d.max_regs_per_thread = 255; // no runtime attribute; the same on every supported arch
    d.smem_per_sm = static_cast<int64_t>(p.sharedMemPerMultiprocessor);
    d.smem_per_block = static_cast<int64_t>(p.sharedMemPerBlock);
    d.smem_per_block_optin = static_cast<int64_t>(p.sharedMemPerBlockOptin);
    d.reserved_smem_per_block = static_cast<int64_t>(p.reservedSharedMemPerBlock);
    d.max_threads_per_sm = p.maxThreadsPerMultiProcessor;
    d.max_threads_per_block = p.maxThreadsPerBlock;
    d.max_blocks_per_sm = p.maxBlocksPerMultiProcessor;
    d.warp_size = p.warpSize;
    d.cooperative_launch = p.cooperativeLaunch;
    d.l2_bytes = p.l2CacheSize;
    d.memory_bytes = static_cast<int64_t>(p.totalGlobalMem);
    out.cuda.push_back(d);
  }
  if (out.cuda.empty()) out.note = "no NVIDIA GPU found (the CUDA runtime reports none)";
#else
  out.note = "no NVIDIA GPU support: this build of ninfer has no CUDA (configured with NINFER_CUDA=OFF)";
#endif
  return out;
}

DeviceSpec parse_device_spec(const std::string& text) {
  if (text == "auto") return {DeviceSpec::Kind::Auto, 0, text};
  if (text == "cpu") return {DeviceSpec::Kind::Cpu, 0, text};
  if (text == "cuda") return {DeviceSpec::Kind::Cuda, 0, text};
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5 && text.size() < 9 &&
      text.find_first_not_of("0123456789", 5) == std::string::npos)
    return {DeviceSpec::Kind::Cuda, std::stoi(text.substr(5)), text};
  throw Error(fmt::format("--device {}: expected auto, cpu, cuda or cuda:N", text));
}

std::vector<ninfer_device_info> devices_for(const DeviceSpec& spec, const Discovery& disc) {
  switch (spec.kind) {
    case DeviceSpec::Kind::Cpu:
      return {host_device()};
    case DeviceSpec::Kind::Auto: {
      std::vector<ninfer_device_info> out = disc.cuda;
      out.push_back(host_device());
      return out;
    }
    case DeviceSpec::Kind::Cuda:
      break;
  }
  if (disc.cuda.empty())
    throw Error(fmt::format("--device {}: {}; use --device cpu (or auto)", spec.text, disc.note));
  if (spec.index >= static_cast<int>(disc.cuda.size()))
    throw Error(fmt::format("--device {}: there are only {} NVIDIA GPU(s), cuda:0 to cuda:{}", spec.text,
                            disc.cuda.size(), disc.cuda.size() - 1));
  return {disc.cuda[static_cast<size_t>(spec.index)]};
}

std::string summary(const ninfer_device_info& d) {
  if (d.kind == NINFER_DEVICE_CPU) return d.name;
  return fmt::format("{} ({}, {} SMs, {:.1f} GiB{})", d.name, d.arch, d.sm_count,
                     d.memory_bytes / 1073741824.0, d.described ? ", described" : "");
}

} // namespace ninfer
