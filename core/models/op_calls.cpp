#include "op_calls.hpp"

#include "ninfer/abi/ops/argmax.h"

#include <cmath>

#include "ninfer/abi/ops/attention.h"
#include "ninfer/abi/ops/conv_l2_norm.h"
#include "ninfer/abi/ops/copy_rows.h"
#include "ninfer/abi/ops/draft_accept.h"
#include "ninfer/abi/ops/embedding.h"
#include "ninfer/abi/ops/gated_delta_step.h"
#include "ninfer/abi/ops/head_norm_rope_append_attention.h"
#include "ninfer/abi/ops/linear.h"
#include "ninfer/abi/ops/norm_linear.h"
#include "ninfer/abi/ops/rms_norm.h"
#include "ninfer/abi/ops/sigmoid_gate.h"
#include "ninfer/abi/ops/silu_mul.h"
#include <fmt/format.h>

#include "linear_observation.hpp"
#include "ninfer/runtime/unfused_forms.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer::models::ops {
namespace {

int32_t i32(int64_t v) { return static_cast<int32_t>(v); }

ninfer_shape shape(int64_t tokens, int64_t d0, int64_t d1 = 0, int64_t d2 = 0, int64_t d3 = 0,
                   int32_t dtype = NINFER_DTYPE_F32) {
  return {tokens, {d0, d1, d2, d3}, dtype, 0, 0};
}

uint32_t token_states_flag(const float* token_states) { return token_states ? NINFER_SHAPE_TOKEN_STATES : 0u; }

} // namespace

void embedding(Backend& be, const Step& s, const Matrix& table, Rows out) {
  ninfer_embedding_args a{s.ids, table.buf.data(), out.p, out.stride, s.tokens, i32(table.rows), i32(table.cols),
                          table.dtype};
  be.run(NINFER_OP_EMBEDDING, shape(s.tokens, table.cols, table.rows, 0, 0, table.dtype), &a);
}

void rms_norm(Backend& be, int64_t tokens, Rows x, Rows* residual, const Vector& w, NormScale scale, float eps,
              Rows y) {
  ninfer_rms_norm_args a{x.p,      x.stride, 0, residual ? residual->p : nullptr, residual ? residual->stride : 0,
                         0,        w.data(), y.p, y.stride, 0, tokens, 1, i32(w.size), eps,
                         scale == NormScale::OnePlusW ? 1 : 0};
  be.run(NINFER_OP_RMS_NORM, shape(tokens, w.size, 1), &a);
}

namespace {

// The ops themselves; the public calls below add the observer's report (linear_observer.hpp),
// once per call whatever the number of parts.
void linear_op(Backend& be, int64_t tokens, Rows x, const Matrix& w, int64_t rows, Rows y, bool accumulate) {
  ninfer_linear_args a{x.p, x.stride, w.buf.data(), y.p, y.stride, tokens, i32(w.cols), i32(rows), w.dtype,
                       accumulate ? 1 : 0, w.wq()};
  be.run(NINFER_OP_LINEAR, shape(tokens, w.cols, rows, ninfer_quant_planning_group(w.wq()),
                                         ninfer_quant_planning_layout(w.wq()), w.dtype), &a);
}

void norm_linear_op(Backend& be, int64_t tokens, const NormedInput& in, const Matrix& w, bool gated, Rows y, Rows proj,
                    bool keep_normed) {
  ninfer_norm_linear_args a{};
  a.x = in.x.p;
  a.x_row_stride = in.x.stride;
  a.norm_w = in.w->data();
  a.eps = in.eps;
  a.norm_offset = in.scale == NormScale::OnePlusW ? 1 : 0;
  a.w = w.buf.data();
  a.w_dtype = w.dtype;
  a.y = y.p;
  a.y_row_stride = y.stride;
  a.normed = keep_normed ? in.normed.p : nullptr;
  a.normed_row_stride = in.normed.stride;
  a.tokens = tokens;
  a.in_features = i32(w.cols);
  a.out_features = i32(w.rows);
  a.gated = gated ? 1 : 0;
  a.wq = w.wq();
  const NormLinearUnfused unfused{in.normed.p, in.normed.stride, proj.p, proj.stride};
  be.run(NINFER_OP_NORM_LINEAR, shape(tokens, w.cols, w.rows, gated ? 1 : 0, ninfer_quant_planning_layout(w.wq()), w.dtype), &a,
         &unfused);
}

// The same for several parts of different layouts: the first normalises the rows (kept in
// in.normed) and projects them, the others project the kept rows; gated, all write `proj` and
// silu_mul of its halves gives y.
void norm_linear_parts(Backend& be, int64_t tokens, const NormedInput& in, const Projection& w, bool gated, Rows y,
                       Rows proj) {
  const Rows out = gated ? proj : y;
  norm_linear_op(be, tokens, in, w.parts.front(), /*gated=*/false, out, {}, /*keep_normed=*/true);
  int64_t at = w.parts.front().rows;
  for (size_t i = 1; i < w.parts.size(); ++i) {
    linear_op(be, tokens, in.normed, w.parts[i], w.parts[i].rows, out.at(at), false);
    at += w.parts[i].rows;
  }
  if (!gated) return;
  const int32_t half = i32(w.rows / 2);
  const ninfer_silu_mul_args m{proj.p, proj.stride, proj.p + half, proj.stride, y.p, y.stride, tokens, half};
  be.run(NINFER_OP_SILU_MUL, shape(tokens, half), &m);
}

} // namespace

void linear(Backend& be, int64_t tokens, Rows x, const Matrix& w, Rows y, bool accumulate) {
  linear_op(be, tokens, x, w, w.rows, y, accumulate);
  if (LinearObserver* o = linear_observer(be)) report_linear_input(be, *o, w.modules, x.p, x.stride, tokens, w.cols);
}

void linear(Backend& be, int64_t tokens, Rows x, const Projection& w, Rows y, bool accumulate) {
  int64_t at = 0;
  for (const Matrix& part : w.parts) {
    linear_op(be, tokens, x, part, part.rows, y.at(at), accumulate);
    at += part.rows;
  }
  if (LinearObserver* o = linear_observer(be)) report_linear_input(be, *o, w.modules, x.p, x.stride, tokens, w.cols);
}

void norm_linear(Backend& be, int64_t tokens, const NormedInput& in, const Matrix& w, bool gated, Rows y, Rows proj,
                 bool keep_normed) {
  LinearObserver* o = linear_observer(be);
  // An observer reads the normed rows, which the op then keeps.
  norm_linear_op(be, tokens, in, w, gated, y, proj, keep_normed || o);
  if (o) report_linear_input(be, *o, w.modules, in.normed.p, in.normed.stride, tokens, w.cols);
}

void norm_linear(Backend& be, int64_t tokens, const NormedInput& in, const Projection& w, bool gated, Rows y, Rows proj,
                 bool keep_normed) {
  LinearObserver* o = linear_observer(be);
  if (w.parts.size() == 1) norm_linear_op(be, tokens, in, w.parts.front(), gated, y, proj, keep_normed || o);
  else norm_linear_parts(be, tokens, in, w, gated, y, proj);
  if (o) report_linear_input(be, *o, w.modules, in.normed.p, in.normed.stride, tokens, w.cols);
}

void linear_first_rows(Backend& be, int64_t tokens, Rows x, const Matrix& w, int64_t rows, Rows y) {
  if (rows < 1 || rows > w.rows)
    throw Error(fmt::format("internal: linear over the first {} rows of a {}-row matrix", rows, w.rows));
  linear_op(be, tokens, x, w, rows, y, false);
}

void argmax(Backend& be, int64_t rows, Rows logits, int32_t vocab, int32_t* ids, float* logprob) {
  ninfer_argmax_args a{logits.p, logits.stride, ids, logprob, rows, vocab};
  be.run(NINFER_OP_ARGMAX, shape(rows, vocab, 0, 0, 0), &a);
}

void sample(Backend& be, int64_t rows, Rows logits, int32_t vocab, const ninfer_sample_row* params, int32_t* ids,
            float* logprob) {
  ninfer_sample_args a{logits.p, logits.stride, params, ids, logprob, rows, vocab};
  be.run(NINFER_OP_SAMPLE, shape(rows, vocab, 0, 0, 0), &a);
}

namespace {
ninfer_head_norm_rope_args head_norm_rope_args(const Step& s, HeadRows q, const Vector& q_w, HeadRows k,
                                               const Vector& k_w, NormScale scale, float eps, int32_t rotary_dim,
                                               double theta) {
  const int32_t head_dim = i32(q_w.size), offset = scale == NormScale::OnePlusW ? 1 : 0;
  return {q.rows.p,   q.rows.stride, q.head_stride,     k.rows.p, k.rows.stride, k.head_stride,
          q_w.data(), k_w.data(),    s.batch.token_pos, s.tokens, q.heads,       k.heads,
          head_dim,   rotary_dim,    eps,               offset,   theta};
}
} // namespace

void head_norm_rope_append_attention(Backend& be, const Step& s, HeadRows q, const Vector& q_w, HeadRows k,
                                     const Vector& k_w, Rows v, const ninfer_kv_cache& cache, NormScale scale,
                                     float eps, int32_t rotary_dim, double theta, Rows out) {
  const ninfer_head_norm_rope_append_attention_args a{
      {head_norm_rope_args(s, q, q_w, k, k_w, scale, eps, rotary_dim, theta),
       {k.rows.p, k.rows.stride, v.p, v.stride, cache, s.batch, s.tokens}},
      {q.rows.p, q.rows.stride, q.head_stride, cache, s.batch, out.p, out.stride, s.tokens, q.heads,
       1.0f / std::sqrt(static_cast<float>(cache.head_dim))}};
  // The op takes one token per sequence: the shape says how many this call has.
  ninfer_shape sh = shape(s.tokens, cache.head_dim, q.heads, cache.kv_heads, s.kv_len, cache.dtype);
  sh.max_seq_tokens = s.max_seq_tokens;
  sh.kv_block_tokens = cache.block_tokens;
  be.run(NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION, sh, &a);
}

void sigmoid_gate(Backend& be, int64_t tokens, Rows x, Rows gate, int64_t gate_head_stride, int32_t heads,
                  int32_t head_dim) {
  ninfer_sigmoid_gate_args a{x.p, x.stride, gate.p, gate.stride, gate_head_stride, tokens, heads, head_dim};
  be.run(NINFER_OP_SIGMOID_GATE, shape(tokens, head_dim, heads), &a);
}

void conv_l2_norm(Backend& be, const Step& s, Rows x, const Vector& weight, int32_t channels, int32_t kernel,
                  float* state, Rows out, int32_t norm_heads, int32_t norm_dim, float eps, float* token_states) {
  ninfer_conv_l2_norm_args a{};
  a.conv = {x.p,     x.stride, weight.data(), state,  out.p, out.stride, s.batch,
            s.tokens, channels, kernel,       token_states};
  a.norm_heads = norm_heads;
  a.norm_dim = norm_dim;
  a.eps = eps;
  ninfer_shape sh = shape(s.tokens, channels, kernel, s.max_seq_tokens, norm_dim);
  sh.flags = token_states_flag(token_states);
  be.run(NINFER_OP_CONV_L2_NORM, sh, &a);
}

namespace {
// The op's variants walk a few tokens per sequence: the shape says how many this call has.
ninfer_shape step_shape(const Step& s, const GdnDims& d) {
  ninfer_shape sh = shape(s.tokens, d.v_heads, d.k_dim, d.v_dim, d.k_heads);
  sh.max_seq_tokens = s.max_seq_tokens;
  sh.flags = s.keep_token_states ? NINFER_SHAPE_TOKEN_STATES : 0u;
  return sh;
}
} // namespace

bool gated_delta_step_reads_normed(Backend& be, const Step& s, const GdnDims& d) {
  return be.plan(NINFER_OP_GATED_DELTA_STEP, step_shape(s, d)).unfused;
}

void gated_delta_step(Backend& be, const Step& s, const GdnStepInputs& in, const GdnDims& d, float* state, Rows out,
                      float* token_states) {
  ninfer_gated_delta_step_args a{};
  a.q = in.q.p;
  a.k = in.k.p;
  a.qk_token_stride = in.q.stride;
  a.v = in.v.p;
  a.v_token_stride = in.v.stride;
  a.a = in.a.p;
  a.b = in.b.p;
  a.ab_token_stride = in.a.stride;
  a.a_log = in.a_log->data();
  a.dt_bias = in.dt_bias->data();
  a.z = in.z.p;
  a.z_token_stride = in.z.stride;
  a.norm_w = in.norm_w->data();
  a.eps = in.eps;
  a.scale = in.scale;
  a.state = state;
  a.out = out.p;
  a.out_token_stride = out.stride;
  a.batch = s.batch;
  a.tokens = s.tokens;
  a.k_heads = d.k_heads;
  a.v_heads = d.v_heads;
  a.k_dim = d.k_dim;
  a.v_dim = d.v_dim;
  a.token_states = token_states;
  const GatedDeltaStepUnfused unfused{in.normed.p,     in.normed.stride,  in.w_a->buf.data(), in.w_b->buf.data(),
                                      i32(in.w_a->cols), in.w_a->dtype,   in.g,               in.beta};
  be.run(NINFER_OP_GATED_DELTA_STEP, step_shape(s, d), &a, &unfused);
}

void copy_rows(Backend& be, int64_t rows, int64_t width, void* dst, int64_t dst_stride, const int32_t* dst_index,
               const void* src, int64_t src_stride, const int32_t* src_index) {
  const ninfer_copy_rows_args a{dst, dst_stride, dst_index, src, src_stride, src_index, rows, width};
  be.run(NINFER_OP_COPY_ROWS, shape(rows, width), &a);
}

void copy_row_groups(Backend& be, int64_t groups, int64_t rows, int64_t width, void* const* dst_groups,
                     int64_t dst_stride, const int32_t* dst_index, const void* const* src_groups, int64_t src_stride,
                     const int32_t* src_index) {
  const ninfer_copy_rows_args a{nullptr, dst_stride, dst_index, nullptr, src_stride, src_index, rows,
                                width,   groups,     dst_groups, src_groups};
  be.run(NINFER_OP_COPY_ROWS, shape(rows, width), &a);
}

void draft_accept(Backend& be, int32_t seqs, int32_t drafts, const int32_t* ids, const int32_t* picks,
                  int32_t* accepted, int32_t* keep_row) {
  const ninfer_draft_accept_args a{ids, picks, accepted, keep_row, seqs, drafts};
  be.run(NINFER_OP_DRAFT_ACCEPT, shape(seqs, drafts), &a);
}

} // namespace ninfer::models::ops
