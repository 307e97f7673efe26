// Variants the CUDA plugins make on demand (ninfer_plugin::make_variant): the run-time compiled
// linear GEMVs of gemv_family.hpp, compiled for the live card through the core's NVRTC service
// (the registrar's compile_cuda, with its kernel cache), loaded as CUDA libraries and planned,
// launched and timed like the registered variants. A schedule table or ninfer-tune names them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ninfer/abi/plugin_abi.h"

namespace ninfer::cuda_plugin {

// ninfer_plugin::make_variant: NINFER_ERR_UNSUPPORTED (with the reason in err when the name looks
// like the family's but is no variant of it) for names that are not variants; another error when
// the variant exists but cannot be made for `device` (not a live CUDA card of compute 8.0+, no
// NVRTC, a compile or load error: the same message again at every later call).
int32_t make_jit_variant(const ninfer_registrar* services, const ninfer_device_info* device, const char* op,
                         const char* name, const ninfer_variant** out, char* err, size_t err_len);
int32_t jit_sweep_variant_names(const char* op, int64_t tokens, char* names, size_t names_len);

} // namespace ninfer::cuda_plugin
