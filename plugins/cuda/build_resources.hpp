// The resource table of the kernels compiled into this plugin, generated at build time from
// the plugin's own cubin (cuobjdump --dump-resource-usage, see cmake/GenKernelResources.cmake).
// It lets the planner size launches for cards of this architecture that are not present.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ninfer::cuda_plugin {

struct BuildResource {
  const char* symbol;
  int32_t registers;
  int32_t shared_bytes; // static shared memory
  int32_t local_bytes;  // per-thread local memory (spills, local arrays)
  int32_t stack_bytes;
};

extern const BuildResource kBuildResources[];
extern const std::size_t kBuildResourceCount;

// nullptr when the symbol was not in the cubin (a build error the registration reports).
const BuildResource* find_build_resource(const char* symbol);

} // namespace ninfer::cuda_plugin
