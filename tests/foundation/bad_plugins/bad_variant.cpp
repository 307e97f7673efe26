// A plugin whose one variant lies about itself (a CUDA variant without kernel resources):
// the core must refuse the variant, and with it the plugin, naming both.
#include <cstdio>

#include "ninfer/abi/plugin_abi.h"

namespace {
int32_t launch(const void*, const void*, const ninfer_launch*, void*, char*, size_t) { return NINFER_OK; }
int32_t score(const ninfer_device_info*, char* why, size_t n) {
  std::snprintf(why, n, "never");
  return 0;
}
int32_t reg(const ninfer_registrar* r) {
  static ninfer_variant v = [] {
    ninfer_variant x{};
    x.op = "gdn_gating";
    x.name = "liar";
    x.exec = NINFER_EXEC_CUDA;
    x.tokens_per_cta = 1;
    x.split_k = 1;
    x.launch = launch;
    return x;
  }();
  return r->add_variant(r->ctx, &v);
}
const ninfer_plugin kPlugin = {NINFER_PLUGIN_ABI_VERSION, sizeof(ninfer_plugin), "bad-variant", "sm_90", "0",
                               NINFER_CAP_CUDA, score, reg};
} // namespace

extern "C" __attribute__((visibility("default"))) const ninfer_plugin* ninfer_plugin_entry(void) { return &kPlugin; }
