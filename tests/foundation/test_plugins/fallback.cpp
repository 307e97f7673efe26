// A fallback plugin (NINFER_CAP_FALLBACK) for the plugin host's tests: it scores 7 on any device
// and registers no variants; built twice, the second time (FALLBACK_BROKEN) with a registration
// that fails. The host must register it only when it may be chosen.
#include <cstdio>

#include "ninfer/abi/plugin_abi.h"

namespace {
int32_t score(const ninfer_device_info*, char* why, size_t n) {
  std::snprintf(why, n, "test fallback: any device");
  return 7;
}
int32_t reg(const ninfer_registrar*) { return FALLBACK_BROKEN ? NINFER_ERR_UNSUPPORTED : NINFER_OK; }
const ninfer_plugin kPlugin = {NINFER_PLUGIN_ABI_VERSION,
                               sizeof(ninfer_plugin),
                               FALLBACK_BROKEN ? "test-fallback-broken" : "test-fallback",
                               "cpu",
                               "0",
                               NINFER_CAP_HOST_EXECUTION | NINFER_CAP_FALLBACK,
                               score,
                               reg};
} // namespace

extern "C" __attribute__((visibility("default"))) const ninfer_plugin* ninfer_plugin_entry(void) { return &kPlugin; }
