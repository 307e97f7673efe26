// The core's unfused forms of the fused ops: for each op the catalog marks `unfused_form`
// (ninfer/op_catalog.hpp), the ops it fuses, run one after another through the backend, each
// planned for its own shape. The planner routes a fused op here (Plan::unfused) where the plugin
// has no variant for the call, or where a schedule table entry (`variant: unfused`) or
// NINFER_UNFUSED_OPS names it; Backend::run then calls run_unfused instead of a launch.
//
// Most forms need nothing beyond the fused op's argument struct. Two need rows the fused op
// keeps in registers: the caller passes them to Backend::run (`unfused_extra`), caller-owned
// like the op's outputs, so no step allocates. The rows are only read or written when the
// unfused form runs.
#pragma once

#include <cstdint>
#include <string_view>

#include "ninfer/abi/plugin_abi.h"

namespace ninfer {

class Backend;

// norm_linear: rms_norm into `normed` (the op's own `normed` rows when the caller keeps them),
// linear into y, or (gated) into `proj` and silu_mul of its two halves into y.
struct NormLinearUnfused {
  float* normed = nullptr; // [T, in_features] float32
  int64_t normed_row_stride = 0;
  float* proj = nullptr; // gated: [T, out_features] float32
  int64_t proj_row_stride = 0;
};

// gated_delta_step: gdn_gating of the layer's normed rows (its own projection, where the fused op
// takes the raw a and b), gated_delta_rule, gated_rms_norm.
struct GatedDeltaStepUnfused {
  const float* normed = nullptr; // the layer's normed input rows [T, hidden]
  int64_t normed_row_stride = 0;
  const void* w_a = nullptr; // gdn_gating's weights [v_heads, hidden] in w_dtype
  const void* w_b = nullptr;
  int32_t hidden = 0;
  int32_t w_dtype = NINFER_DTYPE_F32;
  float* g = nullptr; // [T, v_heads] float32, contiguous
  float* beta = nullptr;
};

// Whether the core implements an unfused form of `op` (the op catalog says which ops have one).
bool unfused_form_implemented(std::string_view op);

// Runs the ops `op` fuses for the call (`args`: the op's argument struct; `extra`: the struct
// above for norm_linear and gated_delta_step, else ignored). Throws ninfer::Error for an op
// without an unfused form, or when a form that needs `extra` gets none.
void run_unfused(Backend& be, std::string_view op, const ninfer_shape& shape, const void* args, const void* extra);

} // namespace ninfer
