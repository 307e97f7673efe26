// cuda-generic: kernel resources read on the device, and the plugin's scoring rule.
//
// The generic plugin's kernels are PTX for compute_80; there is no machine code at build time,
// so no ptxas report and no resource table. Resources exist only once the driver has compiled
// the PTX for the card that is present: find_build_resource() below asks the runtime
// (cudaFuncGetAttributes) for them at registration. That needs the kernel's host handle, and
// the shared kernel sources name kernels by their mangled symbol; the map from one to the other
// is recorded by wrapping __cudaRegisterFunction, which nvcc's generated start-up code calls
// once per kernel with both (this definition is hidden inside the plugin, so only the plugin's
// own kernels pass through it, and it forwards every call to the CUDA runtime's).
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "build_resources.hpp"
#include "generic_plugin.hpp"
#include "kernels/common/grid_dependency.cuh"

namespace ninfer::cuda_plugin {
namespace {

std::vector<KernelHandle>& kernels() {
  static auto* k = new std::vector<KernelHandle>; // never destroyed: used from static init
  return *k;
}

struct Ready {
  bool checked = false;
  bool ok = false;
  char why[256] = {0};
  char name[128] = {0};
  int major = 0, minor = 0, ordinal = -1;
};

Ready& ready() {
  static Ready r;
  return r;
}

} // namespace

const std::vector<KernelHandle>& registered_kernels() { return kernels(); }

const BuildResource* find_build_resource(const char* symbol) {
  static std::deque<BuildResource> found; // stable addresses: variants keep pointers into it
  for (const auto& r : found)
    if (std::strcmp(r.symbol, symbol) == 0) return &r;
  for (const auto& k : kernels()) {
    if (std::strcmp(k.symbol, symbol) != 0) continue;
    cudaFuncAttributes a{};
    // The NVRTC-compiled kernel's, or (PTX fallback) loading the kernel's module makes the driver
    // JIT-compile its PTX for this device (or take it from ~/.nv/ComputeCache).
    if (cudaError_t rc = cudaFuncGetAttributes(&a, device_entry(k.host)); rc != cudaSuccess) {
      std::fprintf(stderr, "cuda-generic: cudaFuncGetAttributes(%s): %s\n", symbol, cudaGetErrorString(rc));
      cudaGetLastError();
      return nullptr;
    }
    found.push_back(BuildResource{k.symbol, a.numRegs, static_cast<int32_t>(a.sharedSizeBytes),
                                  static_cast<int32_t>(a.localSizeBytes), static_cast<int32_t>(a.localSizeBytes)});
    return &found.back();
  }
  return nullptr;
}

int32_t generic_device_ready(const ninfer_registrar* reg) {
  Ready& r = ready();
  if (r.checked) return r.ok;
  r.checked = true;
  int n = 0;
  if (cudaError_t rc = cudaGetDeviceCount(&n); rc != cudaSuccess || n == 0) {
    std::snprintf(r.why, sizeof r.why,
                  "no CUDA device was present when the plugin loaded (%s); it compiles its kernels for the "
                  "GPU it runs on and cannot describe other cards",
                  rc != cudaSuccess ? cudaGetErrorString(rc) : "0 devices");
    cudaGetLastError();
    return 0;
  }
  int dev = 0;
  cudaDeviceProp p{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
    std::snprintf(r.why, sizeof r.why, "cannot read the current CUDA device's properties");
    cudaGetLastError();
    return 0;
  }
  r.ordinal = dev;
  r.major = p.major;
  r.minor = p.minor;
  std::snprintf(r.name, sizeof r.name, "%s", p.name);
  if (p.major < 8) {
    std::snprintf(r.why, sizeof r.why, "needs compute capability 8.0 or newer, %s is compute %d.%d", p.name, p.major,
                  p.minor);
    return 0;
  }
  if (kernels().empty()) {
    std::snprintf(r.why, sizeof r.why, "no kernels were registered with the CUDA runtime (start-up hook missing)");
    return 0;
  }
  std::string why;
  if (!load_nvrtc_kernels(reg, p.major, p.minor, &why))
    std::fprintf(stderr, "cuda-generic: running the driver-compiled compute_80 PTX: %s\n", why.c_str());
  r.ok = true;
  return 1;
}

int32_t generic_score(const ninfer_device_info* d, char* why, size_t why_len) {
  const Ready& r = ready();
  if (d->kind != NINFER_DEVICE_CUDA) {
    std::snprintf(why, why_len, "cuda-generic runs on CUDA devices only");
    return 0;
  }
  if (d->described) {
    std::snprintf(why, why_len,
                  "cuda-generic reads its kernels' resources on the GPU it runs on; it cannot plan for a "
                  "described card");
    return 0;
  }
  if (d->cc_major < 8) {
    std::snprintf(why, why_len, "cuda-generic needs compute 8.0 or newer, device is compute %d.%d", d->cc_major,
                  d->cc_minor);
    return 0;
  }
  if (!r.ok) {
    std::snprintf(why, why_len, "cuda-generic: %s", r.checked ? r.why : "variants were not registered");
    return 0;
  }
  if (d->ordinal != r.ordinal || d->cc_major != r.major || d->cc_minor != r.minor ||
      std::strcmp(d->name, r.name) != 0) {
    std::snprintf(why, why_len, "cuda-generic registered its kernels for %s (device %d, compute %d.%d), not this one",
                  r.name, r.ordinal, r.major, r.minor);
    return 0;
  }
  // Below every exact-architecture plugin (100), above nothing.
  std::snprintf(why, why_len, "generic: %s", generic_kernels_origin().c_str());
  return 10;
}

} // namespace ninfer::cuda_plugin

// The start-up hook (see the top of this file). The signature is crt/host_runtime.h's.
extern "C" void __cudaRegisterFunction(void** handle, const char* host_fun, char* device_fun, const char* device_name,
                                       int thread_limit, uint3* tid, uint3* bid, dim3* bdim, dim3* gdim, int* wsize) {
  using Fn = void (*)(void**, const char*, char*, const char*, int, uint3*, uint3*, dim3*, dim3*, int*);
  static Fn real = [] {
    auto f = reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, "__cudaRegisterFunction"));
    if (!f)
      if (void* rt = ::dlopen("libcudart.so." NINFER_CUDART_SOVERSION, RTLD_NOW | RTLD_NOLOAD))
        f = reinterpret_cast<Fn>(::dlsym(rt, "__cudaRegisterFunction"));
    if (!f) std::fprintf(stderr, "cuda-generic: the CUDA runtime's __cudaRegisterFunction was not found\n");
    return f;
  }();
  ninfer::cuda_plugin::kernels().push_back({device_name, host_fun});
  if (real) real(handle, host_fun, device_fun, device_name, thread_limit, tid, bid, bdim, gdim, wsize);
}
