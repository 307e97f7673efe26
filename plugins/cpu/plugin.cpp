// Entry point of the CPU reference plugin.
#include <cstdio>

#include "cpu_ops.hpp"
#include "ninfer/abi/plugin_abi.h"

namespace {

int32_t score(const ninfer_device_info* d, char* why, size_t why_len) {
  if (d->kind != NINFER_DEVICE_CPU) {
    std::snprintf(why, why_len, "the CPU reference plugin runs on the host only");
    return 0;
  }
  // Low on purpose: the host always has this plugin, and any other that claims the host
  // (a faster CPU backend) should win.
  std::snprintf(why, why_len, "reference implementation, runs anywhere");
  return 1;
}

int32_t register_variants(const ninfer_registrar* r) {
  return ninfer::cpu_plugin::register_gdn_gating(r);
}

const ninfer_plugin kPlugin = {
    NINFER_PLUGIN_ABI_VERSION,
    sizeof(ninfer_plugin),
    "cpu",
    "cpu",
    NINFER_PLUGIN_VERSION,
    NINFER_CAP_HOST_EXECUTION | NINFER_CAP_BF16,
    score,
    register_variants,
};

} // namespace

extern "C" __attribute__((visibility("default"))) const ninfer_plugin* ninfer_plugin_entry(void) {
  return &kPlugin;
}
