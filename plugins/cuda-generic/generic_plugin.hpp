// What the cuda-generic plugin adds to the shared entry point (plugins/cuda/plugin_entry.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ninfer/abi/device_info.h"
#include "ninfer/abi/plugin_abi.h"

namespace ninfer::cuda_plugin {

// Checks the live device before the shared registration runs: 1 when it is a CUDA GPU of
// compute 8.0 or newer whose kernels' resources can be read (then the variants are registered
// with those), 0 otherwise (then nothing is registered and score() says why). Compiles the
// kernels with NVRTC through the registrar's compiler where it can (nvrtc_kernels.cpp).
int32_t generic_device_ready(const ninfer_registrar* r);
// > 0 only for that same live device; 0 with a reason for described cards and everything else.
int32_t generic_score(const ninfer_device_info* d, char* why, size_t why_len);

// One kernel of the plugin as the CUDA runtime registered it at start-up.
struct KernelHandle {
  const char* symbol; // the mangled device name (extern "C": the plain name)
  const void* host;   // the host stub the shared launch code names
};
const std::vector<KernelHandle>& registered_kernels();

// Compiles the shared kernel sources with NVRTC for compute cc_major.cc_minor through the
// registrar, loads them, and maps every registered kernel's host stub to its NVRTC twin
// (device_entry() then hands the runtime that twin). On failure returns false with the reason
// in `why`, and the plugin runs its compute_80 PTX instead. NINFER_GENERIC_NVRTC=0 skips it.
bool load_nvrtc_kernels(const ninfer_registrar* r, int cc_major, int cc_minor, std::string* why);
// A one-line account of which kernels run ("NVRTC-compiled for sm_90 ..." or the PTX fallback).
const std::string& generic_kernels_origin();

} // namespace ninfer::cuda_plugin
