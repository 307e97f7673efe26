// norm_linear on the host (contract: ninfer/abi/ops/norm_linear.h): the row norm, the blocked
// linear kernel and SiLU-multiply run one after another on the same row functions as the ops
// they fuse, so a model computes the same bits with or without this op (the model tests check
// that against cpu-unfused, tests/models/unfused_fallback_test.cpp).
#include "common/cpu_ops.hpp"
#include "common/host_variant.hpp"
#include "ninfer/abi/ops/linear.h"
#include "ninfer/abi/ops/norm_linear.h"
#include "common/row_math.hpp"
#include "linear/quant_dequant.hpp"

namespace ninfer::cpu_plugin {
namespace {

int32_t supports(const void*, const ninfer_shape* s) {
  const bool gated = s->dims[2] != 0;
  return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0 && (!gated || s->dims[1] % 2 == 0) &&
         quant_layout_readable(s);
}

// The normed rows (unless the caller keeps them) and, gated, the projection before SwiGLU.
size_t workspace(const void*, const ninfer_shape* s, int64_t tokens) {
  return static_cast<size_t>(tokens) * static_cast<size_t>(s->dims[0] + (s->dims[2] ? s->dims[1] : 0)) *
         sizeof(float);
}

// `round_x`: the linear multiplies the normed rows rounded to bf16 (nearest even) when the
// weights are bf16, while the normed rows the caller keeps stay float32.
int32_t run(const ninfer_norm_linear_args& a, const ninfer_launch* l, bool round_x, char* err, size_t err_len) {
  const int64_t t0 = l->token_begin, rows = l->token_end - t0, K = a.in_features, N = a.out_features;
  if (const char* problem = quant_weight_problem(a.w_dtype, a.wq, K))
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "norm_linear: %s", problem);
  const ninfer_shape s{rows, {K, N, a.gated, a.wq ? a.wq->layout : 0}, a.w_dtype};
  const size_t need = workspace(nullptr, &s, rows) + (round_x ? static_cast<size_t>(rows * K) * sizeof(float) : 0);
  if (!l->workspace || l->workspace_bytes < need)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "norm_linear: workspace of %zu bytes, %zu needed",
                l->workspace_bytes, need);
  float* scratch = static_cast<float*>(l->workspace);
  // Normed rows: the caller's buffer when it wants them, else the workspace.
  float* xn = a.normed ? a.normed + t0 * a.normed_row_stride : scratch;
  const int64_t xn_stride = a.normed ? a.normed_row_stride : K;
  for (int64_t r = 0; r < rows; ++r)
    rms_norm_row(a.x + (t0 + r) * a.x_row_stride, xn + r * xn_stride, a.in_features, a.norm_w,
                 a.norm_offset ? 1.0 : 0.0, a.eps);
  float* proj = scratch + rows * K;
  ninfer_linear_args la{};
  la.x = xn;
  la.x_row_stride = xn_stride;
  la.w = a.w;
  la.y = a.gated ? proj : a.y + t0 * a.y_row_stride;
  la.y_row_stride = a.gated ? N : a.y_row_stride;
  la.tokens = rows;
  la.in_features = a.in_features;
  la.out_features = a.out_features;
  la.w_dtype = a.w_dtype;
  la.wq = a.wq;
  if (round_x) linear_rows_bf16_x(la, 0, rows, proj + (a.gated ? rows * N : 0)); // rounding space past proj
  else linear_rows(la, 0, rows);
  if (a.gated) {
    const int64_t half = N / 2;
    for (int64_t r = 0; r < rows; ++r)
      silu_mul_row(proj + r * N, proj + r * N + half, a.y + (t0 + r) * a.y_row_stride, half);
  }
  return NINFER_OK;
}

int32_t launch(const void*, const void* args, const ninfer_launch* l, void*, char* err, size_t err_len) {
  return run(*static_cast<const ninfer_norm_linear_args*>(args), l, false, err, err_len);
}

// `emulate_bf16_x`: the numerics of the CUDA plugin's route for several tokens (its norm_linear
// takes one token; the model then runs rms_norm, linear on `cublaslt`, which rounds x to bf16,
// and silu_mul), for the tests that compare a GPU with this emulation
// (tests/gpu_models/large_model_test.cpp). Never the planner's own choice: a table names it.
size_t emulate_workspace(const void*, const ninfer_shape* s, int64_t tokens) {
  return workspace(nullptr, s, tokens) + static_cast<size_t>(tokens) * static_cast<size_t>(s->dims[0]) * sizeof(float);
}

int32_t launch_emulate_bf16_x(const void*, const void* args, const ninfer_launch* l, void*, char* err, size_t err_len) {
  return run(*static_cast<const ninfer_norm_linear_args*>(args), l, true, err, err_len);
}

} // namespace

int32_t register_norm_linear(const ninfer_registrar* r) {
  static const ninfer_variant v =
      host_variant(NINFER_OP_NORM_LINEAR, "reference", kLinearWeightDtypes, supports, launch, workspace);
  static const ninfer_variant emulate = host_variant(NINFER_OP_NORM_LINEAR, "emulate_bf16_x", kF32OrBf16, supports,
                                                     launch_emulate_bf16_x, emulate_workspace);
  if (int32_t rc = r->add_variant(r->ctx, &v); rc != NINFER_OK) return rc;
  return r->add_variant(r->ctx, &emulate);
}

} // namespace ninfer::cpu_plugin
