// Pieces of the Gated DeltaNet ops that the fused host ops (conv_l2_norm, gated_delta_step)
// run as well, so that they compute the very bits of the ops they fuse.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ninfer/abi/ops/causal_conv1d.h"

namespace ninfer::cpu_plugin {

// causal_conv1d's whole call (checks, then every (sequence, channel) in parallel):
// gated_deltanet/causal_conv1d.cpp.
int32_t causal_conv1d_call(const ninfer_causal_conv1d_args& a, char* err, size_t err_len);

// gdn_gating's formulas on a raw projection (gated_deltanet/gdn_gating.cpp):
// g = -exp(a_log) * softplus(a + dt_bias) and beta = sigmoid(b), in double, rounded once.
float gdn_log_decay(double a, float a_log, float dt_bias);
float gdn_beta(double b);

} // namespace ninfer::cpu_plugin
