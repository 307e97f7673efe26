// A plugin whose one variant is a library call (NINFER_GEOMETRY_LIBRARY) that also claims to be
// cooperative: the planner gives a library variant one launch it does not size, so no CTA
// count could be proven resident. The core must refuse it, naming the variant.
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
    x.name = "cooperative_library";
    x.exec = NINFER_EXEC_HOST;
    x.geometry = NINFER_GEOMETRY_LIBRARY;
    x.cooperative = 1;
    x.tokens_per_cta = 1;
    x.split_k = 1;
    x.dtype_mask = 1u << NINFER_DTYPE_F32;
    x.launch = launch;
    return x;
  }();
  return r->add_variant(r->ctx, &v);
}
const ninfer_plugin kPlugin = {NINFER_PLUGIN_ABI_VERSION, sizeof(ninfer_plugin), "bad-library", "cpu", "0",
                               NINFER_CAP_HOST_EXECUTION, score, reg};
} // namespace

extern "C" __attribute__((visibility("default"))) const ninfer_plugin* ninfer_plugin_entry(void) { return &kPlugin; }
