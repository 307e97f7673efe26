// What the linear and norm_linear variant families of this folder share: argument checks, the
// CUDA grid, the one-token vector GEMVs' shape and alignment rules, and their registration
// functions (called by register_linear in linear/linear.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include <algorithm>

#include "common/grid_dependency.cuh"
#include "ninfer/abi/ops/linear.h"
#include "ninfer/abi/plugin_abi.h"
#include "common/token_variant.cuh"

namespace ninfer::cuda_plugin {

// Largest grid.y a launch may have; token tiles beyond it are strided over by the kernels.
inline constexpr unsigned kMaxGridY = 65535;

// grid.x: blocks of `rows_per_cta` outputs, from out_features (the shape, never the device);
// grid.y: the planner's token tiles.
inline dim3 linear_grid(int32_t out_features, int rows_per_cta, int32_t token_tiles) {
  const unsigned blocks = static_cast<unsigned>((static_cast<int64_t>(out_features) + rows_per_cta - 1) / rows_per_cta);
  const unsigned tiles = static_cast<unsigned>(token_tiles) < kMaxGridY ? static_cast<unsigned>(token_tiles) : kMaxGridY;
  return dim3(blocks, tiles);
}

// The grid of a one-wave kernel (linear/row_pair_one_wave.cuh) over `items` in blocks of
// `per_block`: one CTA per block, but at most as many as the device holds at once (resident_ctas),
// so every CTA is resident from the start and walks blocks in turn.
inline dim3 one_wave_grid(const void* kernel, int threads, size_t dynamic_smem, int64_t items, int per_block) {
  const int64_t blocks = (items + per_block - 1) / per_block;
  const int resident = resident_ctas(kernel, dim3(static_cast<unsigned>(threads)), dynamic_smem);
  return dim3(static_cast<unsigned>(resident > 0 ? std::min<int64_t>(blocks, resident) : blocks));
}

// A message when the arguments break the contract or disagree with the planned shape (whose
// dynamic shared memory the launch carries), else nullptr.
inline const char* linear_args_invalid(const ninfer_linear_args& a, const ninfer_launch& l,
                                       size_t (*dynamic_smem)(const void*, const ninfer_shape*)) {
  if (a.w_dtype != NINFER_DTYPE_F32 && a.w_dtype != NINFER_DTYPE_BF16) return "w_dtype must be F32 or BF16";
  if (a.in_features < 1 || a.out_features < 1) return "in_features and out_features must be >= 1";
  if (dynamic_smem) {
    const ninfer_shape s{a.tokens, {a.in_features, a.out_features, 0, 0}, a.w_dtype};
    if (dynamic_smem(nullptr, &s) > l.dynamic_smem_bytes) return "in_features is larger than the planned shape's dims[0]";
  }
  return nullptr;
}

// The one-token vector GEMVs (gemv_4warps, norm_linear): a shape of one token whose rows are whole
// 16-byte vectors (in_features a multiple of 8) and whose sizes fit the kernels' int32 indices.
inline bool one_token_vector_rows(const ninfer_shape& s) {
  return s.tokens == 1 && s.dims[0] > 0 && s.dims[0] % 8 == 0 && s.dims[0] <= INT32_MAX && s.dims[1] > 0 &&
         s.dims[1] <= INT32_MAX;
}

// Whether p is 16-byte aligned, for the vector GEMVs' 16-byte loads.
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Whether every row of x (`tokens` rows `row_stride` floats apart, from x) starts 16-byte aligned.
inline bool x_rows_aligned16(const float* x, int64_t tokens, int64_t row_stride) {
  return aligned16(x) && (tokens <= 1 || row_stride % 4 == 0);
}

// The variant definition (common/token_variant.cuh) of a one-token linear GEMV that loads 16-byte
// vectors of x and W (gemv_4warps, gemv_4warps_one_wave), less its name, block size, kernels and
// grid.
struct OneTokenVectorLinearDef : TokenDefDefaults {
  using Args = ninfer_linear_args;
  static constexpr const char* op = NINFER_OP_LINEAR;
  static constexpr int32_t geometry = NINFER_GEOMETRY_TOKEN_TILED;
  static constexpr uint32_t dtype_mask = kF32OrBf16Mask;
  static int32_t dtype(const Args& a) { return a.w_dtype; }
  // One token (a batch streams W once for all its tokens through gemv_mma_t2..t8 or cuBLASLt), rows
  // of whole 16-byte vectors.
  static int32_t supports(const void*, const ninfer_shape* s) { return one_token_vector_rows(*s); }
  static const char* invalid(const Args& a, const ninfer_launch& l) {
    if (const char* why = linear_args_invalid(a, l, nullptr)) return why;
    if (a.in_features % 8 != 0) return "in_features must be a multiple of 8";
    if (!x_rows_aligned16(a.x, a.tokens, a.x_row_stride) || !aligned16(a.w))
      return "x rows and w must be 16-byte aligned";
    return nullptr;
  }
};

// One per variant family, each defined in the file of the same name (linear/<name>.cu).
int32_t register_linear_gemv_mma(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_linear_gemv_warp(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_linear_gemv_4warps(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_linear_gemv_4warps_one_wave(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_linear_fma_tiles(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_linear_gemv_quant(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_linear_gemv_quant_mma(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_linear_gemv_quant_mma_split(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_linear_gemv_int4_lean(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_linear_gemv_fp8_lean(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_linear_cublaslt(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_linear_cublaslt_dequant(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_norm_linear_gemv_warp(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_norm_linear_gemv_4warps(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_norm_linear_gemv_4warps_one_wave(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_norm_linear_cublaslt(const ninfer_registrar* r, char* err, size_t err_len);

} // namespace ninfer::cuda_plugin
