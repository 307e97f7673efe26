#include "ninfer/runtime/unfused_forms.hpp"

#include <fmt/format.h>

#include <string>

#include "ninfer/abi/ops/attention.h"
#include "ninfer/abi/ops/causal_conv1d.h"
#include "ninfer/abi/ops/conv_l2_norm.h"
#include "ninfer/abi/ops/gated_delta_rule.h"
#include "ninfer/abi/ops/gated_delta_step.h"
#include "ninfer/abi/ops/gated_rms_norm.h"
#include "ninfer/abi/ops/gdn_gating.h"
#include "ninfer/abi/ops/head_norm_rope.h"
#include "ninfer/abi/ops/head_norm_rope_append.h"
#include "ninfer/abi/ops/head_norm_rope_append_attention.h"
#include "ninfer/abi/ops/kv_append.h"
#include "ninfer/abi/ops/l2_norm.h"
#include "ninfer/abi/ops/linear.h"
#include "ninfer/abi/ops/norm_linear.h"
#include "ninfer/abi/ops/rms_norm.h"
#include "ninfer/abi/ops/rope.h"
#include "ninfer/abi/ops/silu_mul.h"
#include "ninfer/support/error.hpp"
#include "ninfer/runtime/backend.hpp"

namespace ninfer {
namespace {

ninfer_shape shape(int64_t tokens, int64_t d0, int64_t d1 = 0, int64_t d2 = 0, int64_t d3 = 0,
                   int32_t dtype = NINFER_DTYPE_F32) {
  return {tokens, {d0, d1, d2, d3}, dtype, 0, 0};
}

// The flag a call with token states carries to the ops that write them.
uint32_t token_states_flag(const void* token_states) { return token_states ? NINFER_SHAPE_TOKEN_STATES : 0u; }

template <class Extra>
const Extra& need(const void* extra, std::string_view op) {
  if (!extra)
    throw Error(fmt::format("the unfused form of {} needs the caller's scratch rows, which this call did not pass "
                            "(ninfer/runtime/unfused_forms.hpp)", op));
  return *static_cast<const Extra*>(extra);
}

// rms_norm of the rows, then linear; gated: linear into the projection rows and silu_mul of
// their halves.
void norm_linear(Backend& be, const ninfer_norm_linear_args& a, const NormLinearUnfused& x) {
  float* normed = a.normed ? a.normed : x.normed;
  const int64_t normed_stride = a.normed ? a.normed_row_stride : x.normed_row_stride;
  const int64_t T = a.tokens;
  const ninfer_rms_norm_args norm{a.x,      a.x_row_stride, 0, nullptr,  0, 0,           a.norm_w, normed,
                                  normed_stride, 0,        T, 1, a.in_features, a.eps, a.norm_offset};
  be.run(NINFER_OP_RMS_NORM, shape(T, a.in_features, 1), &norm);
  const ninfer_shape lin = shape(T, a.in_features, a.out_features, ninfer_quant_planning_group(a.wq),
                                 ninfer_quant_planning_layout(a.wq), a.w_dtype);
  if (!a.gated) {
    const ninfer_linear_args l{normed, normed_stride, a.w, a.y, a.y_row_stride, T, a.in_features, a.out_features,
                               a.w_dtype, 0, a.wq};
    return be.run(NINFER_OP_LINEAR, lin, &l);
  }
  const ninfer_linear_args l{normed, normed_stride, a.w, x.proj, x.proj_row_stride, T, a.in_features, a.out_features,
                             a.w_dtype, 0, a.wq};
  be.run(NINFER_OP_LINEAR, lin, &l);
  const int32_t half = a.out_features / 2;
  const ninfer_silu_mul_args m{x.proj, x.proj_row_stride, x.proj + half, x.proj_row_stride, a.y, a.y_row_stride, T,
                               half};
  be.run(NINFER_OP_SILU_MUL, shape(T, half), &m);
}

void head_rms_norm(Backend& be, const ninfer_head_norm_rope_args& r, float* x, int64_t token_stride,
                   int64_t head_stride, int32_t heads, const float* w) {
  const ninfer_rms_norm_args a{x, token_stride, head_stride, nullptr, 0, 0, w, x, token_stride, head_stride,
                               r.tokens, heads, r.head_dim, r.eps, r.weight_offset};
  be.run(NINFER_OP_RMS_NORM, shape(r.tokens, r.head_dim, heads), &a);
}

void rope(Backend& be, const ninfer_head_norm_rope_args& r, float* x, int64_t token_stride, int64_t head_stride,
          int32_t heads) {
  const ninfer_rope_args a{x, token_stride, head_stride, r.positions, r.tokens, heads, r.head_dim, r.rotary_dim,
                           r.theta};
  be.run(NINFER_OP_ROPE, shape(r.tokens, r.head_dim, heads, r.rotary_dim), &a);
}

// The q heads' norm, the k heads' norm, then rope of both: one launch where the k heads follow
// the q heads with the same strides.
void head_norm_rope(Backend& be, const ninfer_head_norm_rope_args& r) {
  head_rms_norm(be, r, r.q, r.q_token_stride, r.q_head_stride, r.q_heads, r.q_weight);
  head_rms_norm(be, r, r.k, r.k_token_stride, r.k_head_stride, r.k_heads, r.k_weight);
  const bool k_follows_q = r.k_token_stride == r.q_token_stride && r.k_head_stride == r.q_head_stride &&
                           r.k == r.q + r.q_heads * r.q_head_stride;
  if (k_follows_q) return rope(be, r, r.q, r.q_token_stride, r.q_head_stride, r.q_heads + r.k_heads);
  rope(be, r, r.q, r.q_token_stride, r.q_head_stride, r.q_heads);
  rope(be, r, r.k, r.k_token_stride, r.k_head_stride, r.k_heads);
}

// head_norm_rope (itself routed: fused where the plugin has it), then kv_append.
void head_norm_rope_append(Backend& be, const ninfer_head_norm_rope_append_args& a) {
  const ninfer_head_norm_rope_args& r = a.rope;
  be.run(NINFER_OP_HEAD_NORM_ROPE, shape(r.tokens, r.head_dim, r.q_heads, r.k_heads, r.rotary_dim), &r);
  const ninfer_kv_cache& c = a.append.cache;
  ninfer_shape append = shape(a.append.tokens, c.head_dim, c.kv_heads, 0, 0, c.dtype);
  append.kv_block_tokens = c.block_tokens;
  be.run(NINFER_OP_KV_APPEND, append, &a.append);
}

// head_norm_rope_append (routed), then attention; the fused op's shape is attention's.
void head_norm_rope_append_attention(Backend& be, const ninfer_shape& s,
                                     const ninfer_head_norm_rope_append_attention_args& a) {
  const ninfer_head_norm_rope_args& r = a.prep.rope;
  const int32_t block_tokens = a.attn.cache.block_tokens;
  ninfer_shape prep = shape(r.tokens, r.head_dim, r.q_heads, r.k_heads, r.rotary_dim, s.dtype);
  prep.kv_block_tokens = block_tokens;
  be.run(NINFER_OP_HEAD_NORM_ROPE_APPEND, prep, &a.prep);
  ninfer_shape attn = shape(s.tokens, s.dims[0], s.dims[1], s.dims[2], s.dims[3], s.dtype);
  attn.kv_block_tokens = block_tokens;
  be.run(NINFER_OP_ATTENTION, attn, &a.attn);
}

void conv_l2_norm(Backend& be, const ninfer_conv_l2_norm_args& a) {
  const ninfer_causal_conv1d_args& c = a.conv;
  ninfer_shape conv = shape(c.tokens, c.channels, c.kernel);
  conv.flags = token_states_flag(c.token_states);
  be.run(NINFER_OP_CAUSAL_CONV1D, conv, &c);
  const ninfer_l2_norm_args n{c.out, c.out_token_stride, a.norm_dim, c.tokens, a.norm_heads, a.norm_dim, a.eps};
  be.run(NINFER_OP_L2_NORM, shape(c.tokens, a.norm_dim, a.norm_heads), &n);
}

// gdn_gating of the normed rows, the delta rule, the gated output norm (in place in out).
void gated_delta_step(Backend& be, const ninfer_shape& s, const ninfer_gated_delta_step_args& a,
                      const GatedDeltaStepUnfused& x) {
  const int64_t T = a.tokens;
  const ninfer_gdn_gating_args gating{x.normed, x.normed_row_stride, x.w_a,  x.w_b,    a.a_log,   a.dt_bias,
                                      x.g,      x.beta,              T,      x.hidden, a.v_heads, x.w_dtype};
  be.run(NINFER_OP_GDN_GATING, shape(T, x.hidden, a.v_heads, 0, 0, x.w_dtype), &gating);
  const ninfer_gated_delta_rule_args rule{a.q,         a.k,          a.qk_token_stride, a.v,     a.v_token_stride,
                                          x.g,         x.beta,       a.state,           a.out,   a.out_token_stride,
                                          a.batch,     T,            a.k_heads,         a.v_heads, a.k_dim,
                                          a.v_dim,     a.scale,      a.token_states};
  const int64_t seq_tokens = s.max_seq_tokens > 0 ? s.max_seq_tokens : 1; // unstated: the op's one
  ninfer_shape rule_shape = shape(T, seq_tokens, a.v_heads, a.k_dim, a.v_dim);
  rule_shape.flags = token_states_flag(a.token_states);
  be.run(NINFER_OP_GATED_DELTA_RULE, rule_shape, &rule);
  const ninfer_gated_rms_norm_args norm{a.out, a.out_token_stride, a.z, a.z_token_stride, a.norm_w, a.out,
                                        a.out_token_stride, T, a.v_heads, a.v_dim, a.eps};
  be.run(NINFER_OP_GATED_RMS_NORM, shape(T, a.v_dim, a.v_heads), &norm);
}

} // namespace

bool unfused_form_implemented(std::string_view op) {
  for (const char* fused : {NINFER_OP_NORM_LINEAR, NINFER_OP_HEAD_NORM_ROPE, NINFER_OP_HEAD_NORM_ROPE_APPEND,
                            NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION, NINFER_OP_CONV_L2_NORM,
                            NINFER_OP_GATED_DELTA_STEP})
    if (op == fused) return true;
  return false;
}

void run_unfused(Backend& be, std::string_view op, const ninfer_shape& s, const void* args, const void* extra) {
  if (op == NINFER_OP_NORM_LINEAR)
    return norm_linear(be, *static_cast<const ninfer_norm_linear_args*>(args), need<NormLinearUnfused>(extra, op));
  if (op == NINFER_OP_HEAD_NORM_ROPE) return head_norm_rope(be, *static_cast<const ninfer_head_norm_rope_args*>(args));
  if (op == NINFER_OP_HEAD_NORM_ROPE_APPEND)
    return head_norm_rope_append(be, *static_cast<const ninfer_head_norm_rope_append_args*>(args));
  if (op == NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION)
    return head_norm_rope_append_attention(be, s,
                                           *static_cast<const ninfer_head_norm_rope_append_attention_args*>(args));
  if (op == NINFER_OP_CONV_L2_NORM) return conv_l2_norm(be, *static_cast<const ninfer_conv_l2_norm_args*>(args));
  if (op == NINFER_OP_GATED_DELTA_STEP)
    return gated_delta_step(be, s, *static_cast<const ninfer_gated_delta_step_args*>(args),
                            need<GatedDeltaStepUnfused>(extra, op));
  throw Error(fmt::format("internal: op '{}' has no unfused form", op));
}

} // namespace ninfer
