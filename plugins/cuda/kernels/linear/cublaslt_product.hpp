// The cuBLASLt matrix product behind the `cublaslt` variants (linear/linear_cublaslt.cu), for
// other variants that end in one: `cublaslt_dequant` (linear/linear_cublaslt_dequant.cu)
// dequantizes quantized weights into a bf16 workspace and multiplies with this. Host side only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "ninfer/abi/ops/linear.h"
#include "ninfer/abi/plugin_abi.h"

namespace ninfer::cuda_plugin {

// cuBLASLt's own workspace (Hopper wants 32 MiB), the last part of every product's workspace.
inline constexpr size_t kCublasLtWorkspaceBytes = 32u << 20;

// Bytes of one part of a cuBLASLt variant's workspace (cast rows, a dequantized W, a product),
// rounded up so that the next part starts 256-byte aligned, as cuBLASLt assumes of its matrices.
inline size_t cublaslt_workspace_part(size_t bytes) { return (bytes + 255) / 256 * 256; }

// Workspace the product of tokens [b, b + tokens) needs for a float32 or bf16 W of shape `s`.
size_t cublaslt_workspace(const ninfer_shape* s, int64_t tokens);

// y rows [b0, e0) of a (F32 or BF16 W, in_features a multiple of 8 for BF16 and 4 for F32):
// bf16 W rounds x to bf16 (split: x as bf16 hi + lo, two products), F32 W is a float32
// product. `workspace` holds cublaslt_workspace(shape, e0 - b0) bytes (split: one more x cast,
// as the cublaslt_x_hi_lo variant reserves).
int32_t cublaslt_product(const ninfer_linear_args& a, int64_t b0, int64_t e0, void* workspace, size_t workspace_size,
                         cudaStream_t stream, bool split, char* err, size_t err_len);

// y[rows, N] (row stride ldy) = xb[rows, K] . W[N, K]^T for a BF16 W and x rows already rounded to
// bf16 (contiguous, K apart, 16-byte aligned), float32 accumulation and output: for a variant
// that writes its own bf16 rows (norm_linear's `cublaslt`). `lt_workspace` holds
// kCublasLtWorkspaceBytes.
int32_t cublaslt_bf16_rows(const void* xb, const void* w, float* y, int64_t ldy, int64_t rows, int32_t K, int32_t N,
                           void* lt_workspace, cudaStream_t stream, char* err, size_t err_len);

} // namespace ninfer::cuda_plugin
