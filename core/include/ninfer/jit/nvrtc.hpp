// Run-time compilation of CUDA C++ kernels with NVRTC, cached on disk (kernel_cache.hpp), and
// loading of the result through the CUDA driver API with the loaded function's resources in
// the plugin ABI's form.
//
// Compiling needs only NVRTC (no GPU): CI compiles and caches. Loading needs a device.
// In a build without CUDA (-DNINFER_CUDA=OFF) every function here throws ninfer::Error saying so.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ninfer/abi/plugin_abi.h"
#include "ninfer/jit/kernel_cache.hpp"

namespace ninfer::jit {

struct CompileRequest {
  std::string name;                          // kernel/variant name, quoted in errors ("linear/tile64x4")
  std::string source;                        // CUDA C++ source text
  std::vector<std::string> options;          // extra NVRTC options, e.g. "-DTILE=64", "-std=c++17"
  std::vector<std::string> name_expressions; // e.g. "scale_kernel<4>": instantiated and lowered
  // Headers the source may #include, as (name it is included by, text), NUL-terminated C
  // strings that outlive the compile: a plugin's whole kernel tree rides along with each of its
  // programs (megabytes), so it is pointed at, never copied. NVRTC reads no files for these.
  // Part of the cache key.
  std::vector<std::pair<const char*, const char*>> headers;
  int cc_major = 0;                          // target compute capability (the detected device's)
  int cc_minor = 0;
};

struct CompiledKernel {
  CacheEntry entry;       // image (cubin or PTX) and the lowered names
  std::string arch;       // "sm_90" (cubin) or "compute_90" (PTX, the driver JIT-compiles it)
  uint64_t key = 0;       // cache key
  bool from_cache = false;
  // The mangled name of a name expression (or the expression itself when it was not one:
  // an extern "C" kernel).
  std::string lowered_name(const std::string& expression) const;
};

// NVRTC's version as major * 1000 + minor * 10 (12080 for 12.8). Throws without CUDA.
int nvrtc_version();
// True when this NVRTC can emit machine code (cubin) for sm_<major><minor>; otherwise compile()
// emits PTX for the newest virtual architecture it knows that is not newer than the target.
bool nvrtc_supports_cubin(int cc_major, int cc_minor);

// The CUDA toolkit's include directories NVRTC needs for <cuda_bf16.h>, <cooperative_groups.h>
// and libcu++ (<cuda/std/...>): $NINFER_CUDA_INCLUDE (a directory), else the include/ folder
// next to the loaded libnvrtc, else the build's toolkit. Empty when none holds cuda_bf16.h.
std::vector<std::string> cuda_include_dirs();

// The cache key of a request (what compile() looks up).
uint64_t cache_key(const CompileRequest& request);

// Compiles (or loads from `cache`, when not null) the request. `key` is cache_key(request) when
// the caller has it already (hashing a plugin's headers takes a while). A compile error throws
// ninfer::Error naming request.name, with NVRTC's log.
CompiledKernel compile(const CompileRequest& request, const KernelCache* cache,
                       std::optional<uint64_t> key = std::nullopt);

// A module loaded into the current CUDA context (the runtime's primary context of the current
// device, or of `device_ordinal` when >= 0, is made current first; the calling thread's current
// device is left as it was). Unloaded on destruction.
class LoadedModule {
 public:
  explicit LoadedModule(const CompiledKernel& kernel, int device_ordinal = -1);
  ~LoadedModule();
  LoadedModule(const LoadedModule&) = delete;
  LoadedModule& operator=(const LoadedModule&) = delete;

  // The CUfunction (as void*) of a name expression or extern "C" name; throws when absent.
  void* function(const std::string& expression) const;
  // cuFuncGetAttribute of that function. `symbol` points into this module's storage: it stays
  // valid while the module lives.
  ninfer_kernel_resources resources(const std::string& expression, int32_t threads_per_block) const;
  // cuLaunchKernel of that function on `stream` (a cudaStream_t; null: the default stream).
  // `params` as cuLaunchKernel takes them: one pointer per kernel argument.
  void launch(const std::string& expression, unsigned grid_x, unsigned block_x, unsigned dynamic_smem, void* stream,
              void** params) const;

  // cuLaunchKernel of a function() handle with a 2-D grid (no name lookup: for hot paths).
  static void launch_function(void* function, unsigned grid_x, unsigned grid_y, unsigned block_x,
                              unsigned dynamic_smem, void* stream, void** params);
  // The driver's residency figure for a function() handle
  // (cuOccupancyMaxActiveBlocksPerMultiprocessor): CTAs of `block` threads per SM.
  static int max_active_blocks_per_sm(void* function, int block, size_t dynamic_smem);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace ninfer::jit
