// linear on the host (contract: ninfer/abi/ops/linear.h): picks the kernel built for the
// best instruction set this CPU has and spreads blocks of weight rows over the thread pool.
// Quantized weights (INT4, INT8, FP8_E4M3) are dequantized a block of rows at a time into
// float32 (linear/quant_dequant.hpp) and multiplied by the same kernel.
#include <algorithm>
#include <vector>

#include "common/cpu_ops.hpp"
#include "common/host_variant.hpp"
#include "common/numerics.hpp"
#include "ninfer/abi/ops/linear.h"
#include "common/parallel.hpp"
#include "linear/quant_dequant.hpp"

namespace ninfer::cpu_plugin {

void linear_kernel_generic(const ninfer_linear_args& a, int64_t t0, int64_t t1, int64_t n0, int64_t n1);
#ifdef NINFER_CPU_AVX2_KERNEL
void linear_kernel_avx2(const ninfer_linear_args& a, int64_t t0, int64_t t1, int64_t n0, int64_t n1);
#endif

namespace {

using Kernel = void (*)(const ninfer_linear_args&, int64_t, int64_t, int64_t, int64_t);

Kernel best_kernel() {
#ifdef NINFER_CPU_AVX2_KERNEL
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return linear_kernel_avx2;
#endif
  return linear_kernel_generic;
}

int32_t supports(const void*, const ninfer_shape* s) {
  return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0 && quant_layout_readable(s);
}

// Token chunks bound the x rows re-read per block.
constexpr int64_t kTokenChunk = 64;

// Weight rows per block: about 128 KiB of weights (float32 for quantized ones, which are
// dequantized a block at a time), so a block stays in L2 while every token of the launch
// streams past it.
int64_t rows_per_block(const ninfer_linear_args& a) {
  const int64_t row_bytes = static_cast<int64_t>(a.in_features) * (a.w_dtype == NINFER_DTYPE_BF16 ? 2 : 4);
  return std::max<int64_t>(2, (128 * 1024 / row_bytes) & ~int64_t{1});
}

// Quantized weights: each block of rows dequantized into the worker's float32 buffer, then the
// float32 kernel on it, with y shifted to the block's first output.
void run_dequantized(const ninfer_linear_args& a, int64_t t0, int64_t t1) {
  static const Kernel kernel = best_kernel();
  const int64_t K = a.in_features, block = rows_per_block(a);
  const int64_t blocks = (a.out_features + block - 1) / block;
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    thread_local std::vector<float> w;
    w.resize(static_cast<size_t>(block * K));
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t n0 = b * block, n1 = std::min<int64_t>(a.out_features, n0 + block);
      for (int64_t n = n0; n < n1; ++n) dequantize_row(a.w, a.w_dtype, *a.wq, K, n, w.data() + (n - n0) * K);
      ninfer_linear_args f = a;
      f.w = w.data();
      f.w_dtype = NINFER_DTYPE_F32;
      f.wq = nullptr;
      f.y = a.y + n0;
      f.out_features = static_cast<int32_t>(n1 - n0);
      for (int64_t t = t0; t < t1; t += kTokenChunk) kernel(f, t, std::min(t1, t + kTokenChunk), 0, n1 - n0);
    }
  });
}

// y rows [t0, t1) of `a`, blocks of weight rows spread over the pool.
void run_blocked(const ninfer_linear_args& a, int64_t t0, int64_t t1) {
  if (ninfer_dtype_is_quantized(a.w_dtype)) return run_dequantized(a, t0, t1);
  static const Kernel kernel = best_kernel();
  const int64_t block = rows_per_block(a);
  const int64_t blocks = (a.out_features + block - 1) / block;
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t n0 = b * block, n1 = std::min<int64_t>(a.out_features, n0 + block);
      for (int64_t t = t0; t < t1; t += kTokenChunk) kernel(a, t, std::min(t1, t + kTokenChunk), n0, n1);
    }
  });
}

int32_t launch(const void*, const void* args, const ninfer_launch* l, void*, char* err, size_t err_len) {
  const auto& a = *static_cast<const ninfer_linear_args*>(args);
  if (const char* problem = quant_weight_problem(a.w_dtype, a.wq, a.in_features))
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "linear/blocked: %s", problem);
  run_blocked(a, l->token_begin, l->token_end);
  return NINFER_OK;
}

// `emulate_bf16_x`: the numerics of the CUDA `cublaslt` variant on the CPU, for tests that
// separate what a kernel gets wrong from what bf16 costs. With bf16 weights, x is rounded to
// bf16 (nearest even) before the product, which then runs exactly as `blocked`; float32
// weights keep x as it is (cublaslt multiplies them in float32 too). Never chosen by the
// planner's own route (`blocked` comes first); a schedule table names it.
size_t emulate_workspace(const void*, const ninfer_shape* s, int64_t tokens) {
  return static_cast<size_t>(tokens) * static_cast<size_t>(s->dims[0]) * sizeof(float);
}

int32_t launch_emulate_bf16_x(const void*, const void* args, const ninfer_launch* l, void*, char* err, size_t err_len) {
  const auto& a = *static_cast<const ninfer_linear_args*>(args);
  const size_t need = static_cast<size_t>((l->token_end - l->token_begin) * a.in_features) * sizeof(float);
  if (a.w_dtype != NINFER_DTYPE_F32 && (!l->workspace || l->workspace_bytes < need))
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "linear/emulate_bf16_x: workspace of %zu bytes, %zu needed",
                l->workspace_bytes, need);
  linear_rows_bf16_x(a, l->token_begin, l->token_end, static_cast<float*>(l->workspace));
  return NINFER_OK;
}

} // namespace

void linear_rows(const ninfer_linear_args& a, int64_t t0, int64_t t1) { run_blocked(a, t0, t1); }

void linear_rows_bf16_x(const ninfer_linear_args& args, int64_t t0, int64_t t1, float* xr) {
  if (args.w_dtype == NINFER_DTYPE_F32) return run_blocked(args, t0, t1);
  ninfer_linear_args a = args;
  const int64_t rows = t1 - t0, k = a.in_features;
  parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t i = 0; i < k; ++i) xr[r * k + i] = round_to_bf16(a.x[(t0 + r) * a.x_row_stride + i]);
  });
  // The rounded rows stand in for x: token t0 + r of the call is row r of xr and of the shifted y.
  a.x = xr;
  a.x_row_stride = k;
  a.y += t0 * a.y_row_stride;
  run_blocked(a, 0, rows);
}

int32_t register_linear(const ninfer_registrar* r) {
  static const ninfer_variant blocked =
      host_variant(NINFER_OP_LINEAR, "blocked", kLinearWeightDtypes, supports, launch);
  static const ninfer_variant emulate = host_variant(NINFER_OP_LINEAR, "emulate_bf16_x", kF32OrBf16, supports,
                                                     launch_emulate_bf16_x, emulate_workspace);
  if (int32_t rc = r->add_variant(r->ctx, &blocked); rc != NINFER_OK) return rc;
  return r->add_variant(r->ctx, &emulate);
}

} // namespace ninfer::cpu_plugin
