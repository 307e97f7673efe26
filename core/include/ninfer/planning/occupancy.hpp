// How many CTAs of a kernel fit on one SM of a device, by the same rules as the CUDA
// occupancy calculator (cuda_occupancy.h, which this wraps), from the kernel's compiled
// resources and the device's description. Works for described devices: no GPU needed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ninfer/abi/device_info.h"
#include "ninfer/abi/plugin_abi.h"

namespace ninfer {

struct Occupancy {
  int blocks_per_sm = 0;  // 0: the kernel cannot run on this device with this configuration
  int64_t residency = 0;  // blocks_per_sm x SM count: CTAs resident at once
  std::string limiter;    // what bounds blocks_per_sm ("registers", "shared memory", ...)
};

Occupancy occupancy(const ninfer_kernel_resources& k, size_t dynamic_smem,
                    const ninfer_device_info& device);

// Fraction of the SM slots used over all waves when `ctas` CTAs run with `residency` slots.
double wave_efficiency(int64_t ctas, int64_t residency);

} // namespace ninfer
