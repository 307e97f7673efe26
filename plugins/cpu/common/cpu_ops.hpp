// Registration functions of the CPU reference plugin's ops, one per op contract
// (plugins/cpu/<family>/<op>.cpp), and what the fused ops share with the ops they fuse.
#pragma once

#include "ninfer/abi/ops/linear.h"
#include "ninfer/abi/plugin_abi.h"

namespace ninfer::cpu_plugin {

int32_t register_gdn_gating(const ninfer_registrar* r);
int32_t register_embedding(const ninfer_registrar* r);
int32_t register_rms_norm(const ninfer_registrar* r);
int32_t register_l2_norm(const ninfer_registrar* r);
int32_t register_gated_rms_norm(const ninfer_registrar* r);
int32_t register_linear(const ninfer_registrar* r);
int32_t register_rope(const ninfer_registrar* r);
int32_t register_head_norm_rope(const ninfer_registrar* r); // rms_norm + rope of q and k heads
int32_t register_head_norm_rope_append(const ninfer_registrar* r); // head_norm_rope + kv_append
int32_t register_head_norm_rope_append_attention(const ninfer_registrar* r); // ... + attention
int32_t register_norm_linear(const ninfer_registrar* r);    // rms_norm + linear (+ silu_mul)
int32_t register_kv_append(const ninfer_registrar* r);
int32_t register_attention(const ninfer_registrar* r);
int32_t register_silu_mul(const ninfer_registrar* r);
int32_t register_sigmoid_gate(const ninfer_registrar* r);
int32_t register_causal_conv1d(const ninfer_registrar* r);
int32_t register_conv_l2_norm(const ninfer_registrar* r);     // causal_conv1d + l2_norm
int32_t register_gated_delta_step(const ninfer_registrar* r); // gdn_gating + gated_delta_rule + gated_rms_norm
int32_t register_argmax(const ninfer_registrar* r);
int32_t register_sample(const ninfer_registrar* r);
int32_t register_fill_random(const ninfer_registrar* r);
int32_t register_copy_rows(const ninfer_registrar* r);
int32_t register_draft_accept(const ninfer_registrar* r);

// The shapes and launches of head_norm_rope and kv_append, which head_norm_rope_append composes.
int32_t head_norm_rope_supports(const void*, const ninfer_shape* s);
int32_t head_norm_rope_launch(const void*, const void* args, const ninfer_launch* l, void*, char* err, size_t err_len);
int32_t kv_append_launch(const void*, const void* args, const ninfer_launch* l, void*, char* err, size_t err_len);
// The shapes and reference launch of attention, which head_norm_rope_append_attention composes.
int32_t attention_supports(const void*, const ninfer_shape* s);
int32_t attention_launch(const void*, const void* args, const ninfer_launch* l, void*, char* err, size_t err_len);

// linear (the blocked kernel) for rows [t0, t1) of `a`: what norm_linear runs after its norm.
void linear_rows(const ninfer_linear_args& a, int64_t t0, int64_t t1);
// The same with the numerics of the CUDA `cublaslt` route (both `emulate_bf16_x` variants): with
// bf16 weights, rows [t0, t1) of x are rounded to bf16 into `xr` ((t1 - t0) * in_features floats)
// before the product; float32 weights keep x as it is.
void linear_rows_bf16_x(const ninfer_linear_args& a, int64_t t0, int64_t t1, float* xr);

// gated_delta_rule has two host forms; plugin.cpp registers them in planning order.
const ninfer_variant& gated_delta_rule_chunked_variant();
const ninfer_variant& gated_delta_rule_recurrent_variant();

} // namespace ninfer::cpu_plugin
