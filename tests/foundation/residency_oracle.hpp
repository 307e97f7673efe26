// An independent statement of the residency rules (CUDA programming guide, occupancy section)
// that the planner's occupancy() is checked against. Written from the rules, not from the
// planner's code: registers are allocated per warp in units of 256 and split evenly over the
// SM's 4 sub-partitions; shared memory per block is static + dynamic + the driver's reserved
// bytes, rounded up to 128 bytes; threads, blocks per SM and the per-block limits bound it too.
#pragma once

#include <algorithm>
#include <cstdint>

#include "ninfer/abi/device_info.h"
#include "ninfer/abi/plugin_abi.h"

namespace ninfer::test {

inline int oracle_blocks_per_sm(const ninfer_kernel_resources& k, int64_t dyn_smem,
                                const ninfer_device_info& d) {
  auto round_up = [](int64_t v, int64_t unit) { return (v + unit - 1) / unit * unit; };
  const int64_t warps = (k.threads_per_block + 31) / 32;
  if (k.threads_per_block > d.max_threads_per_block || k.threads_per_block > k.max_threads_per_block) return 0;
  const int64_t by_threads = (d.max_threads_per_sm / 32) / warps;

  const int64_t regs_per_warp = round_up(static_cast<int64_t>(k.registers_per_thread) * 32, 256);
  if (k.registers_per_thread > d.max_regs_per_thread || regs_per_warp * round_up(warps, 4) > d.regs_per_block)
    return 0;
  const int64_t warps_per_partition = (d.regs_per_sm / 4) / regs_per_warp;
  const int64_t by_regs = warps_per_partition * 4 / warps;

  // A block needs the opt-in limit once its total (reserved bytes included) passes the
  // default per-block limit; the limits count the user's bytes, the driver's reserved bytes
  // come on top.
  const int64_t smem = round_up(k.static_smem_bytes + d.reserved_smem_per_block + dyn_smem, 128);
  const int64_t block_limit = ((k.static_smem_bytes + d.reserved_smem_per_block + dyn_smem) > d.smem_per_block
                                   ? d.smem_per_block_optin
                                   : d.smem_per_block) +
                              d.reserved_smem_per_block;
  if (smem > block_limit) return 0;
  const int64_t by_smem = smem == 0 ? INT32_MAX : d.smem_per_sm / smem;

  return static_cast<int>(std::min({by_threads, by_regs, by_smem, static_cast<int64_t>(d.max_blocks_per_sm)}));
}

} // namespace ninfer::test
