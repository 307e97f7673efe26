// The shared kernel sources as cuda-generic hands them to NVRTC at run time, embedded at build
// time (cmake/EmbedSources.cmake; the list is made in plugins/cuda-generic/CMakeLists.txt).
#pragma once

#include <cstddef>

namespace ninfer::cuda_plugin::nvrtc_sources {

struct SourceFile {
  const char* name; // programs: the file name; headers: the name sources #include it with
  const char* text;
};

// Every plugins/cuda/kernels/<family>/*.cu that defines kernels: one NVRTC program each, named
// by its file name (unique across the families).
extern const SourceFile kPrograms[];
extern const size_t kProgramCount;
// What they may include: the kernels' own headers, the ABI's op contracts, and the stand-ins
// for the C++ standard headers NVRTC lacks (plugins/cuda/nvrtc_std/).
extern const SourceFile kHeaders[];
extern const size_t kHeaderCount;

} // namespace ninfer::cuda_plugin::nvrtc_sources
