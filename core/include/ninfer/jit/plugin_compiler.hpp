// Run-time compilation offered to plugins through the registrar (ninfer_registrar::compile_cuda):
// a plugin without machine code for the card (cuda-generic) hands the core its kernel sources;
// the core compiles them with NVRTC for the device, through the kernel cache, in parallel.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ninfer/abi/plugin_abi.h"

namespace ninfer::jit {

// The registrar's compile_cuda (see plugin_abi.h for the contract). Images stay valid for the
// life of the process.
int32_t compile_for_plugin(const ninfer_cuda_program* programs, int32_t count, int32_t cc_major, int32_t cc_minor,
                           ninfer_cuda_image* images, char* err, size_t err_len);

} // namespace ninfer::jit
