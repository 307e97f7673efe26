// cuda-generic: the shared kernels compiled with NVRTC for the card that is present, and the
// map from each kernel's host stub (what the shared launch code names) to its NVRTC twin.
//
// Each plugins/cuda/kernels/<family>/*.cu that defines kernels is one NVRTC program: its host side
// is left out under __CUDACC_RTC__, and what remains is the same device code the exact plugins
// compile with nvcc. The core compiles the programs (registrar->compile_cuda: NVRTC, its kernel
// cache, all cores), this file loads the images as CUDA libraries (context-independent) and
// looks every registered kernel up by its extern "C" name. From then on device_entry() hands
// the runtime a cudaKernel_t instead of the stub, for launches, attributes and occupancy alike.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "generic_plugin.hpp"
#include "nvrtc_programs.hpp"

namespace ninfer::cuda_plugin {
namespace {

struct NvrtcKernels {
  bool active = false;
  int cc_major = 0;
  std::unordered_map<const void*, const void*> entry; // host stub -> cudaKernel_t; read-only once active
  std::string origin = "compute_80 PTX JIT-compiled by the driver (no architecture-specific code)";
};

NvrtcKernels& state() {
  static NvrtcKernels s;
  return s;
}

bool fail(std::string* why, const std::string& msg) {
  *why = msg;
  return false;
}

} // namespace

bool load_nvrtc_kernels(const ninfer_registrar* r, int cc_major, int cc_minor, std::string* why) {
  NvrtcKernels& s = state();
  if (const char* env = std::getenv("NINFER_GENERIC_NVRTC"); env && std::strcmp(env, "0") == 0)
    return fail(why, "NINFER_GENERIC_NVRTC=0");
  if (!r->compile_cuda) return fail(why, "the core offers no run-time compiler");
  const auto t0 = std::chrono::steady_clock::now();

  const nvrtc_sources::ProgramList list;
  const std::vector<ninfer_cuda_program>& programs = list.programs;
  const std::vector<std::string>& names = list.names;
  std::vector<ninfer_cuda_image> images(programs.size());
  char err[4096] = {0};
  if (int32_t rc = r->compile_cuda(r->ctx, programs.data(), static_cast<int32_t>(programs.size()), cc_major, cc_minor,
                                   images.data(), err, sizeof err);
      rc != NINFER_OK)
    return fail(why, std::string("NVRTC: ") + err);

  // Unloaded again unless every kernel is found: the plugin then falls back to its PTX and
  // never uses them.
  struct Libraries {
    std::vector<cudaLibrary_t> loaded;
    bool keep = false;
    ~Libraries() {
      if (keep) return;
      for (cudaLibrary_t lib : loaded) cudaLibraryUnload(lib);
    }
  } libs;
  std::vector<cudaLibrary_t>& libraries = libs.loaded;
  int cached = 0;
  bool ptx = false;
  for (size_t i = 0; i < images.size(); ++i) {
    cudaLibrary_t lib = nullptr;
    if (cudaError_t rc = cudaLibraryLoadData(&lib, images[i].data, nullptr, nullptr, 0, nullptr, nullptr, 0);
        rc != cudaSuccess) {
      cudaGetLastError();
      return fail(why, names[i] + ": cudaLibraryLoadData: " + cudaGetErrorString(rc));
    }
    libraries.push_back(lib);
    cached += images[i].from_cache;
    ptx = ptx || images[i].is_ptx;
  }
  // Every kernel of every library by name: enumerated, so that no lookup fails (a failing
  // runtime call is harmless but shows up as an error under compute-sanitizer).
  std::unordered_map<std::string, cudaKernel_t> by_name;
  for (size_t i = 0; i < libraries.size(); ++i) {
    unsigned count = 0;
    std::vector<cudaKernel_t> found;
    cudaError_t rc = cudaLibraryGetKernelCount(&count, libraries[i]);
    if (rc == cudaSuccess) {
      found.resize(count);
      rc = cudaLibraryEnumerateKernels(found.data(), count, libraries[i]);
    }
    for (cudaKernel_t k : found) {
      const char* name = nullptr;
      if (rc == cudaSuccess) rc = cudaFuncGetName(&name, reinterpret_cast<const void*>(k));
      if (rc == cudaSuccess && name) by_name.emplace(name, k);
    }
    if (rc != cudaSuccess) {
      cudaGetLastError();
      return fail(why, names[i] + ": listing its kernels: " + cudaGetErrorString(rc));
    }
  }
  std::unordered_map<const void*, const void*> entry;
  for (const KernelHandle& k : registered_kernels()) {
    auto it = by_name.find(k.symbol);
    if (it == by_name.end()) return fail(why, std::string("kernel ") + k.symbol + " is in none of the NVRTC programs");
    entry[k.host] = reinterpret_cast<const void*>(it->second);
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  char origin[256];
  std::snprintf(origin, sizeof origin,
                "kernels compiled by NVRTC for %s_%d%d (%zu programs, %d from the kernel cache, %.0f ms)",
                ptx ? "compute" : "sm", cc_major, cc_minor, programs.size(), cached, ms);
  libs.keep = true; // the kernels' code lives as long as the plugin
  s.origin = origin;
  s.entry = std::move(entry);
  s.cc_major = cc_major;
  s.active = true;
  return true;
}

const void* generic_kernel_entry(const void* kernel) {
  const NvrtcKernels& s = state();
  if (!s.active) return kernel;
  auto it = s.entry.find(kernel);
  return it == s.entry.end() ? kernel : it->second;
}

bool generic_kernels_have_prologue() { return state().active && state().cc_major >= 9; }

const std::string& generic_kernels_origin() { return state().origin; }

} // namespace ninfer::cuda_plugin
