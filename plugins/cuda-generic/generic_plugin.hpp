// What the cuda-generic plugin adds to the shared entry point (plugins/cuda/plugin_entry.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "ninfer/abi/device_info.h"

namespace ninfer::cuda_plugin {

// Checks the live device before the shared registration runs: 1 when it is a CUDA GPU of
// compute 8.0 or newer whose kernels' resources can be read (then the variants are registered
// with those), 0 otherwise (then nothing is registered and score() says why).
int32_t generic_device_ready();
// > 0 only for that same live device; 0 with a reason for described cards and everything else.
int32_t generic_score(const ninfer_device_info* d, char* why, size_t why_len);

} // namespace ninfer::cuda_plugin
