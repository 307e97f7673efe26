// Run-time compiled variants: op variants whose kernels are compiled with NVRTC for the live
// device when something first names them, then planned, launched, timed and scheduled exactly
// like the variants a plugin registers.
//
// A name starting with "jit_" belongs to this namespace (no plugin may use the prefix). The
// only family so far is linear's jit_gemv_t<threads>_r<rows>_v<vec>_m<tokens>
// (ninfer/jit/linear_gemv.hpp). Building one compiles its source for the device's compute
// capability (or takes the image from the on-disk kernel cache), loads it through the driver API
// and fills a ninfer_variant whose resources are read from the loaded functions. The result is
// kept for the life of the process, once per (device, op, name), like a plugin's variants; a
// failure is kept too, so it is reported, not recompiled, at every later lookup.
//
// Where names are resolved: schedule tables (check_against, then the planner), and
// Backend::run_variant (ninfer-tune, tests). The planner's own route never considers a JIT
// variant: only a table (or an explicit run_variant) names one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ninfer/abi/device_info.h"
#include "ninfer/abi/plugin_abi.h"

namespace ninfer {

struct LoadedPlugin;

namespace jit {

inline constexpr std::string_view kJitVariantPrefix = "jit_";
bool is_jit_variant_name(std::string_view name);

// The variant `name` of `op` for `plugin` on `device`, built at the first call. Throws
// ninfer::Error naming it when the name does not parse, the op has no run-time family, the
// plugin or device cannot run one (a CUDA plugin on a live CUDA device of compute >= 8.0:
// resources come from the loaded kernel, so described cards are refused), NVRTC is missing or
// fails (its log is in the message), or the image cannot be loaded.
const ninfer_variant& jit_variant(const LoadedPlugin& plugin, const ninfer_device_info& device, std::string_view op,
                                  std::string_view name);

// The plugin's own variant of that name; else, for a jit_ name, jit_variant() (which throws when
// it cannot be built); else nullptr.
const ninfer_variant* resolve_variant(const LoadedPlugin& plugin, const ninfer_device_info& device,
                                      std::string_view op, std::string_view name);

// The JIT variants ninfer-tune adds for `op` at a bucket of `tokens` (names only; nothing is
// compiled). Empty for ops and token counts without a run-time family.
std::vector<std::string> jit_sweep_names(std::string_view op, int64_t tokens);

} // namespace jit
} // namespace ninfer
