// Typed calls of the op contracts: each fills the op's argument struct and its planning shape
// and runs it through the backend. Blocks read as a list of ops; the route is always the
// planner's choice: a plugin variant, or for a fused op the plugin cannot run (or a schedule
// table or NINFER_UNFUSED_OPS names so) the core's unfused form, which runs the ops it fuses
// (ninfer/runtime/unfused_forms.hpp).
#pragma once

#include <cstdint>

#include "ninfer/abi/ops/kv_append.h"
#include "ninfer/abi/ops/sample.h"
#include "ninfer/runtime/backend.hpp"
#include "step.hpp"
#include "weights.hpp"

namespace ninfer::models::ops {

// Rows of `width` float32 elements, `stride` apart, starting at p (backend memory).
struct Rows {
  float* p = nullptr;
  int64_t stride = 0;
  Rows at(int64_t column) const { return {p + column, stride}; }
  Rows from(int64_t row) const { return {p + row * stride, stride}; } // rows `row` on
};

enum class NormScale { W, OnePlusW };

void embedding(Backend& be, const Step& s, const Matrix& table, Rows out);

// y = rmsnorm(x [+ residual]) per row of `dim`; with a residual, residual := x + residual.
void rms_norm(Backend& be, int64_t tokens, Rows x, Rows* residual, const Vector& w, NormScale scale, float eps,
              Rows y);

// A block's input: the residual stream x through rms_norm with weights w. `normed` is a buffer
// for the normed rows (written by the unfused form, or when the block asks for them).
struct NormedInput {
  Rows x;
  const Vector* w = nullptr;
  NormScale scale = NormScale::W;
  float eps = 1e-6f;
  Rows normed;
};
// y = rms_norm(in) . W^T, or gated: y = silu_mul of its two halves (W = [gate; up]): the op
// ninfer/abi/ops/norm_linear.h, whose unfused form runs rms_norm into in.normed, linear (gated:
// into `proj`, 2x the width of y) and silu_mul. With keep_normed, in.normed holds the normed
// rows afterwards whatever the route.
void norm_linear(Backend& be, int64_t tokens, const NormedInput& in, const Matrix& w, bool gated, Rows y, Rows proj,
                 bool keep_normed);
// The same for a stacked projection: one op for one part; with several (layouts that cannot be
// one matrix, weights.hpp), norm_linear of the first keeping the normed rows, linear of the
// others on them, and (gated) silu_mul, so in.normed is written whatever keep_normed says.
void norm_linear(Backend& be, int64_t tokens, const NormedInput& in, const Projection& w, bool gated, Rows y, Rows proj,
                 bool keep_normed);

// y[:, 0:w.rows] = x[:, 0:w.cols] . W^T; with `accumulate`, y[:, 0:w.rows] += that (y updated in
// place: a residual stream takes o_proj / down_proj without a separate add).
void linear(Backend& be, int64_t tokens, Rows x, const Matrix& w, Rows y, bool accumulate = false);
// The same over w's first `rows` rows only (y gets `rows` columns): every weight layout keeps a
// row's codes and scales together (ninfer/abi/ops/quant_weight.h), so the first rows are a matrix
// of their own (the drafter's shorter vocabulary, docs/speculative.md).
void linear_first_rows(Backend& be, int64_t tokens, Rows x, const Matrix& w, int64_t rows, Rows y);
// The same for a stacked projection: one linear per part, into its columns of y.
void linear(Backend& be, int64_t tokens, Rows x, const Projection& w, Rows y, bool accumulate = false);

// ids[r] = argmax of logits row r (ties: lowest id), logprob[r] its log-probability.
void argmax(Backend& be, int64_t rows, Rows logits, int32_t vocab, int32_t* ids, float* logprob);
// ids[r] = a token drawn from logits row r under params[r] (ninfer/abi/ops/sample.h; params in
// the backend's memory), logprob[r] its raw log-probability.
void sample(Backend& be, int64_t rows, Rows logits, int32_t vocab, const ninfer_sample_row* params, int32_t* ids,
            float* logprob);

// `heads` head rows per token, head_stride apart, from the start of `rows`.
struct HeadRows {
  Rows rows;
  int64_t head_stride = 0;
  int32_t heads = 0;
};
// An attention layer after its projection: per-head RMSNorm of q (weights q_w) and k (k_w), rope
// of both, kv_append of the k rows (contiguous heads) and v, then attention of the q rows (head
// stride q.head_stride) into `out` (ninfer/abi/ops/head_norm_rope_append_attention.h). The op
// takes one token per sequence, so prompt chunks take its unfused form: head_norm_rope_append
// (itself fused or not), then attention. After it the q and k rows' values are unspecified.
void head_norm_rope_append_attention(Backend& be, const Step& s, HeadRows q, const Vector& q_w, HeadRows k,
                                     const Vector& k_w, Rows v, const ninfer_kv_cache& cache, NormScale scale,
                                     float eps, int32_t rotary_dim, double theta, Rows out);
void sigmoid_gate(Backend& be, int64_t tokens, Rows x, Rows gate, int64_t gate_head_stride, int32_t heads,
                  int32_t head_dim);
// causal_conv1d, then l2_norm of the output's first norm_heads heads of norm_dim channels
// (ninfer/abi/ops/conv_l2_norm.h; unfused: the two).
// With `token_states`, also the state after every token ([T, channels, kernel - 1]).
void conv_l2_norm(Backend& be, const Step& s, Rows x, const Vector& weight, int32_t channels, int32_t kernel,
                  float* state, Rows out, int32_t norm_heads, int32_t norm_dim, float eps,
                  float* token_states = nullptr);
struct GdnDims {
  int32_t k_heads, v_heads, k_dim, v_dim;
};

// gated_delta_step (ninfer/abi/ops/gated_delta_step.h): gating from the raw projections a and b
// (a at a.p + t*a.stride + h, b alike), the rule's update per token, gated output norm. Its
// variants walk a decode step's or verification pass's tokens; its unfused form (prompt chunks,
// or a plugin without the op) projects
// the gating from the layer's normed rows itself (gdn_gating with w_a, w_b into g and beta), then
// runs gated_delta_rule and gated_rms_norm.
struct GdnStepInputs {
  Rows q, k, v, z;
  Rows a, b; // raw gating projections, one float per value head
  const Vector* a_log = nullptr;
  const Vector* dt_bias = nullptr;
  const Vector* norm_w = nullptr;
  float eps = 1e-6f;
  float scale = 1.f;
  // For the unfused form: the layer's normed rows, gdn_gating's weights, rows for g and beta.
  Rows normed;
  const Matrix* w_a = nullptr;
  const Matrix* w_b = nullptr;
  float* g = nullptr; // [tokens, v_heads] each
  float* beta = nullptr;
};
// Whether the planner's route for this step's gated_delta_step is its unfused form, which reads
// the layer's normed rows: the input projection keeps them only then.
bool gated_delta_step_reads_normed(Backend& be, const Step& s, const GdnDims& d);
// With `token_states` (given exactly when s.keep_token_states), also the state after every token
// ([T, v_heads, k_dim, v_dim]).
void gated_delta_step(Backend& be, const Step& s, const GdnStepInputs& in, const GdnDims& d, float* state, Rows out,
                      float* token_states = nullptr);

// For r in [0, rows): row dst_index[r] of dst = row src_index[r] of src, `width` 32-bit words
// (ninfer/abi/ops/copy_rows.h); a null index is row r. Strides in words.
void copy_rows(Backend& be, int64_t rows, int64_t width, void* dst, int64_t dst_stride, const int32_t* dst_index,
               const void* src, int64_t src_stride, const int32_t* src_index);
// The same copy between `groups` buffer pairs at once: dst_groups[g] and src_groups[g] (device
// arrays of base pointers) for every g in [0, groups).
void copy_row_groups(Backend& be, int64_t groups, int64_t rows, int64_t width, void* const* dst_groups,
                     int64_t dst_stride, const int32_t* dst_index, const void* const* src_groups, int64_t src_stride,
                     const int32_t* src_index);
// Greedy verification of a speculative round (ninfer/abi/ops/draft_accept.h): per sequence, how
// many of its `drafts` drafts the model's picks repeat, and the row it keeps.
void draft_accept(Backend& be, int32_t seqs, int32_t drafts, const int32_t* ids, const int32_t* picks,
                  int32_t* accepted, int32_t* keep_row);

} // namespace ninfer::models::ops
