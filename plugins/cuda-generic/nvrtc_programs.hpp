// The embedded kernel sources (nvrtc_sources.hpp) as the program list the core's compile_cuda
// takes: one program per kernel file, named "cuda-generic/<file>", every header offered to each.
// Used by the plugin (nvrtc_kernels.cpp) and by the CPU test that compiles them all
// (tests/jit/generic_sources_test.cpp), so both hand NVRTC the same programs.
#pragma once

#include <string>
#include <vector>

#include "ninfer/abi/plugin_abi.h"

namespace ninfer::cuda_plugin::nvrtc_sources {

class ProgramList {
 public:
  ProgramList();
  // `programs` points into the object's own vectors: neither copied nor moved.
  ProgramList(const ProgramList&) = delete;
  ProgramList& operator=(const ProgramList&) = delete;

  std::vector<ninfer_cuda_program> programs;
  std::vector<std::string> names; // programs[i].name

 private:
  std::vector<const char*> header_names_, header_text_;
};

} // namespace ninfer::cuda_plugin::nvrtc_sources
