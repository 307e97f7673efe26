// Entry point of the CPU reference plugin.
#include <cstdio>
#include <initializer_list>

#include "common/cpu_ops.hpp"
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

int32_t register_gated_delta_rule(const ninfer_registrar* r) {
  using namespace ninfer::cpu_plugin;
  // The planner takes the first host variant that supports a shape. The chunked form supports
  // only calls with a sequence of two or more tokens (prefill), so decode steps fall through
  // to the recurrent form, which supports everything.
  if (int32_t rc = r->add_variant(r->ctx, &gated_delta_rule_chunked_variant()); rc != NINFER_OK) return rc;
  return r->add_variant(r->ctx, &gated_delta_rule_recurrent_variant());
}

// The test build cpu-unfused (plugins/cpu/CMakeLists.txt) leaves out the fused ops, as a plugin
// written before them would: the planner then routes them to the core's unfused forms.
#ifdef NINFER_CPU_WITHOUT_FUSED_OPS
constexpr bool kFusedOps = false;
#else
constexpr bool kFusedOps = true;
#endif

int32_t register_variants(const ninfer_registrar* r) {
  using namespace ninfer::cpu_plugin;
  for (auto reg : {register_gdn_gating, register_embedding, register_rms_norm, register_l2_norm,
                   register_gated_rms_norm, register_linear, register_rope, register_kv_append, register_attention,
                   register_silu_mul, register_sigmoid_gate, register_causal_conv1d, register_gated_delta_rule,
                   register_argmax, register_sample, register_fill_random, register_copy_rows,
                   register_draft_accept})
    if (int32_t rc = reg(r); rc != NINFER_OK) return rc;
  if (kFusedOps)
    for (auto reg : {register_head_norm_rope, register_head_norm_rope_append, register_head_norm_rope_append_attention,
                     register_norm_linear, register_conv_l2_norm, register_gated_delta_step})
      if (int32_t rc = reg(r); rc != NINFER_OK) return rc;
  return NINFER_OK;
}

#ifndef NINFER_CPU_PLUGIN_NAME
#define NINFER_CPU_PLUGIN_NAME "cpu"
#endif

const ninfer_plugin kPlugin = {
    NINFER_PLUGIN_ABI_VERSION,
    sizeof(ninfer_plugin),
    NINFER_CPU_PLUGIN_NAME,
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
