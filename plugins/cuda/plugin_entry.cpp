// Entry point of one CUDA architecture plugin. The same source is compiled once per plugin;
// the target architecture comes from compile definitions set by ninfer_add_cuda_plugin().
#include <cstdio>
#include <initializer_list>

#include "cuda_variant.hpp"
#include "jit/jit_variants.hpp"
#include "ninfer/abi/plugin_abi.h"
#if NINFER_RUNTIME_RESOURCES
#include "generic_plugin.hpp"
#endif

#ifndef NINFER_PLUGIN_NAME
#error "NINFER_PLUGIN_NAME must be defined by the build"
#endif

namespace {

int32_t score(const ninfer_device_info* d, char* why, size_t why_len) {
#if NINFER_RUNTIME_RESOURCES
  return ninfer::cuda_plugin::generic_score(d, why, why_len); // cuda-generic's own rule
#endif
  // Exact compute capability only. Machine code for sm_X.Y may run on a later minor of the
  // same major, and `a` targets run on exactly one; either way a kernel tuned or built for
  // another chip is never what we want to run, so there is no family fallback.
  if (d->kind != NINFER_DEVICE_CUDA) {
    std::snprintf(why, why_len, "%s runs on CUDA devices only", NINFER_PLUGIN_NAME);
    return 0;
  }
  if (d->cc_major != NINFER_TARGET_CC_MAJOR || d->cc_minor != NINFER_TARGET_CC_MINOR) {
    std::snprintf(why, why_len, "built for %s (compute %d.%d), device is compute %d.%d",
                  NINFER_TARGET_ARCH, NINFER_TARGET_CC_MAJOR, NINFER_TARGET_CC_MINOR, d->cc_major,
                  d->cc_minor);
    return 0;
  }
  std::snprintf(why, why_len, "exact match: built for %s, device is compute %d.%d",
                NINFER_TARGET_ARCH, d->cc_major, d->cc_minor);
  return 100;
}

int32_t register_variants(const ninfer_registrar* r) {
  using namespace ninfer::cuda_plugin;
  using Register = int32_t (*)(const ninfer_registrar*, char*, size_t);
#if NINFER_RUNTIME_RESOURCES
  // cuda-generic has resources only for a live GPU: without one it registers nothing (and
  // scores 0 with the reason) rather than failing to load.
  if (!generic_device_ready(r)) return NINFER_OK;
#endif
  for (Register fn : {register_gdn_gating, register_pointwise_ops, register_linear, register_attention,
                      register_gated_deltanet, register_argmax, register_sample, register_draft_accept,
                      register_fill_random}) {
    char err[256] = {0};
    if (int32_t rc = fn(r, err, sizeof err); rc != NINFER_OK) {
      std::fprintf(stderr, "%s: %s\n", NINFER_PLUGIN_NAME, err);
      return rc;
    }
  }
  return NINFER_OK;
}

// cuda-generic compiles its kernels while it registers (tens of seconds on a machine's first
// start): the core registers it only where no exact plugin serves the device (NINFER_CAP_FALLBACK).
#if NINFER_RUNTIME_RESOURCES
constexpr uint64_t kFallback = NINFER_CAP_FALLBACK;
#else
constexpr uint64_t kFallback = 0;
#endif

const ninfer_plugin kPlugin = {
    NINFER_PLUGIN_ABI_VERSION,
    sizeof(ninfer_plugin),
    NINFER_PLUGIN_NAME,
    NINFER_TARGET_ARCH,
    NINFER_PLUGIN_VERSION,
    NINFER_CAP_CUDA | NINFER_CAP_COOPERATIVE | NINFER_CAP_BF16 |
        (NINFER_ARCH_SPECIFIC ? NINFER_CAP_ARCH_SPECIFIC : 0) | kFallback,
    score,
    register_variants,
    ninfer::cuda_plugin::make_jit_variant,
    ninfer::cuda_plugin::jit_sweep_variant_names,
};

} // namespace

extern "C" __attribute__((visibility("default"))) const ninfer_plugin* ninfer_plugin_entry(void) {
  return &kPlugin;
}
