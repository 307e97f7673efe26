// norm_linear for a decode batch or a mixed step's chunk (2 to kMaxTokens tokens, contract:
// ninfer/abi/ops/norm_linear.h), bf16 weights: the `cublaslt` variant. One kernel normalises
// each row and writes it rounded to bf16 straight into the cuBLASLt product's input
// (linear/cublaslt_product.hpp); gated, a second kernel applies SwiGLU to the product's rows.
//
// Why: the GEMVs fold the norm only for one token, so such calls ran the op unfused: rms_norm
// (float32 rows to memory), the `cublaslt` linear's cast of those rows to bf16, the product (and
// silu_mul). The cast was a launch of its own per projection, two per layer, in every step of a
// batch and every mixed step (ncu, Qwen3-8B, one 16-token chunk: 73 RMSNorms at 7 us and 144
// casts beside the products, docs/serving.md). Here the norm is the cast: one launch and one
// float32 round trip of the rows fewer per projection. The result is the unfused route's on
// sm_90 (rms_norm, then cublaslt's x rounded to bf16): the same float32 row, the same rounding;
// only the sum of squares is added in another order.
//
// kMaxTokens bounds the workspace: the bf16 rows, and gated the float32 product of both halves
// (256 rows of Qwen3.5-27B's gate|up: 35.7 MB), below the `cublaslt` linear's own at a
// 2,048-token prefill chunk. Prompts run the op unfused.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/grid_dependency.cuh"
#include "common/pointwise_math.cuh"
#include "ninfer/abi/ops/norm_linear.h"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include <cstdio>

#include "../../cuda_variant.hpp"
#include "common/token_variant.cuh"
#include "linear/cublaslt_product.hpp"
#include "linear/variants.hpp"
#endif

namespace ninfer::cuda_plugin {
namespace norm_linear_lt {

constexpr int kNormThreads = 256;
constexpr int kSwigluThreads = 256;
constexpr int64_t kMaxTokens = 256;

// f[0..8) = p[0..8), in two 16-byte loads where `vec` (p 16-byte aligned).
__device__ __forceinline__ void load8(const float* p, bool vec, float (&f)[8]) {
  if (vec) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(p));
    const float4 b = __ldg(reinterpret_cast<const float4*>(p + 4));
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
    return;
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) f[j] = p[j];
}

} // namespace norm_linear_lt
} // namespace ninfer::cuda_plugin

// Row `begin + blockIdx.x` of x: out[blockIdx.x][k] = bf16(x[k] * r * s[k]) (the contract's xn,
// rounded), and normed's row in float32 when the call keeps it. K % 8 == 0.
extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::norm_linear_lt::kNormThreads)
    ninfer_norm_linear_rows_bf16(ninfer_norm_linear_args a, int64_t begin, __nv_bfloat16* out) {
  using namespace ninfer::cuda_plugin;
  using norm_linear_lt::load8;
  grid_dependency_prologue();
  __shared__ float red[norm_linear_lt::kNormThreads / 32];
  const int64_t t = begin + blockIdx.x;
  const float* x = a.x + t * a.x_row_stride;
  const int K = a.in_features, vecs = K / 8;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool xv = aligned(x), wv = aligned(a.norm_w);
  float ss = 0.f;
  for (int i = threadIdx.x; i < vecs; i += blockDim.x) {
    float f[8];
    load8(x + 8 * i, xv, f);
#pragma unroll
    for (int j = 0; j < 8; ++j) ss += f[j] * f[j];
  }
  ss = warp_sum(ss);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
  __syncthreads();
  float total = 0.f;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) total += red[w]; // one order for every thread
  const float inv = rsqrtf(total / K + a.eps);
  const float offset = a.norm_offset ? 1.f : 0.f;
  __nv_bfloat16* o = out + static_cast<int64_t>(blockIdx.x) * K;
  float* normed = a.normed ? a.normed + t * a.normed_row_stride : nullptr;
  for (int i = threadIdx.x; i < vecs; i += blockDim.x) {
    float f[8], s[8];
    load8(x + 8 * i, xv, f);
    load8(a.norm_w + 8 * i, wv, s);
    uint4 v;
    uint32_t* packed = &v.x;
#pragma unroll
    for (int j = 0; j < 8; ++j) f[j] = f[j] * inv * (offset + s[j]); // rms_norm's expression
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const __nv_bfloat162 p = __floats2bfloat162_rn(f[2 * j], f[2 * j + 1]);
      packed[j] = *reinterpret_cast<const uint32_t*>(&p);
    }
    *reinterpret_cast<uint4*>(o + 8 * i) = v; // rows of K * 2 bytes from a 256-byte aligned start
    if (normed)
#pragma unroll
      for (int j = 0; j < 8; ++j) normed[8 * i + j] = f[j];
  }
}

// y[r][c] = silu(p[r][c]) * p[r][c + half] for r < rows, c < half, p rows 2 * half apart (the
// product of the gate rows, then the up rows); grid-stride.
extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::norm_linear_lt::kSwigluThreads)
    ninfer_norm_linear_swiglu(const float* p, int64_t rows, int32_t half, float* y, int64_t y_row_stride) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  const int64_t n = rows * half;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / half, c = i % half;
    const float* row = p + r * 2 * half;
    y[r * y_row_stride + c] = ninfer::cuda_plugin::silu(row[c]) * row[c + half];
  }
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace norm_linear_lt {
namespace {

// dims: K, out_features, gated (planning shape of norm_linear.h).
size_t rows_bytes(const ninfer_shape* s, int64_t tokens) {
  return cublaslt_workspace_part(size_t(tokens) * size_t(s->dims[0]) * 2);
}
size_t product_bytes(const ninfer_shape* s, int64_t tokens) {
  return s->dims[2] ? cublaslt_workspace_part(size_t(tokens) * size_t(s->dims[1]) * 4) : 0;
}
size_t workspace_bytes(const void*, const ninfer_shape* s, int64_t tokens) {
  return rows_bytes(s, tokens) + product_bytes(s, tokens) + kCublasLtWorkspaceBytes;
}

// Two tokens or more (one is the GEMVs'), 16-byte bf16 rows (the product's input), a whole
// SwiGLU pair per output, plain bf16 weights.
int32_t supports(const void*, const ninfer_shape* s) {
  return s->tokens >= 2 && s->tokens <= kMaxTokens && s->dims[0] > 0 && s->dims[0] % 8 == 0 &&
         s->dims[0] <= INT32_MAX && s->dims[1] > 0 && s->dims[1] <= INT32_MAX && (!s->dims[2] || s->dims[1] % 2 == 0) &&
         s->dims[3] == 0;
}

const char* invalid(const ninfer_norm_linear_args& a, const ninfer_launch& l) {
  if (a.w_dtype != NINFER_DTYPE_BF16 || a.wq) return "w_dtype must be BF16";
  if (a.in_features < 8 || a.in_features % 8 != 0) return "in_features must be a positive multiple of 8";
  if (a.out_features < 1 || (a.gated && a.out_features % 2 != 0)) return "out_features must be >= 1 (gated: even)";
  if (l.token_end - l.token_begin > kMaxTokens) return "more tokens than the variant takes in one launch";
  if (reinterpret_cast<uintptr_t>(a.w) % 16 != 0) return "w must be 16-byte aligned";
  return nullptr;
}

cudaError_t launch_swiglu(const float* p, int64_t rows, int32_t half, float* y, int64_t y_stride,
                          cudaStream_t stream) {
  const int64_t blocks = (rows * half + kSwigluThreads - 1) / kSwigluThreads;
  const unsigned grid = static_cast<unsigned>(blocks < 65535 ? blocks : 65535); // grid-stride beyond
  void* params[] = {&p, &rows, &half, &y, &y_stride};
  return launch_kernel(reinterpret_cast<const void*>(ninfer_norm_linear_swiglu), dim3(grid), dim3(kSwigluThreads),
                       params, 0, stream);
}

int32_t launch(const void*, const void* args, const ninfer_launch* l, void* stream_ptr, char* err, size_t err_len) {
  const ninfer_norm_linear_args& a = *static_cast<const ninfer_norm_linear_args*>(args);
  if (const char* why = invalid(a, *l)) {
    std::snprintf(err, err_len, "norm_linear/cublaslt: %s", why);
    return NINFER_ERR_INVALID_ARGUMENT;
  }
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  const int64_t b = l->token_begin, rows = l->token_end - b;
  if (rows <= 0) return NINFER_OK;
  const ninfer_shape s{rows, {a.in_features, a.out_features, a.gated, 0}, a.w_dtype};
  if (!l->workspace || l->workspace_bytes < workspace_bytes(nullptr, &s, rows)) {
    std::snprintf(err, err_len, "norm_linear/cublaslt: workspace of %zu bytes, %zu needed", l->workspace_bytes,
                  workspace_bytes(nullptr, &s, rows));
    return NINFER_ERR_INVALID_ARGUMENT;
  }
  char* ws = static_cast<char*>(l->workspace);
  auto* xb = reinterpret_cast<__nv_bfloat16*>(ws);
  float* proj = a.gated ? reinterpret_cast<float*>(ws + rows_bytes(&s, rows)) : nullptr;
  void* lt_ws = ws + rows_bytes(&s, rows) + product_bytes(&s, rows);

  void* params[] = {const_cast<ninfer_norm_linear_args*>(&a), const_cast<int64_t*>(&b), &xb};
  if (cudaError_t rc = launch_kernel(reinterpret_cast<const void*>(ninfer_norm_linear_rows_bf16),
                                     dim3(static_cast<unsigned>(rows)), dim3(kNormThreads), params, 0, stream);
      rc != cudaSuccess) {
    cudaGetLastError();
    std::snprintf(err, err_len, "norm_linear/cublaslt: norm of tokens [%lld, %lld): %s", static_cast<long long>(b),
                  static_cast<long long>(b + rows), cudaGetErrorString(rc));
    return NINFER_ERR_LAUNCH;
  }
  float* y = a.gated ? proj : a.y + b * a.y_row_stride;
  const int64_t ldy = a.gated ? a.out_features : a.y_row_stride;
  if (int32_t rc = cublaslt_bf16_rows(xb, a.w, y, ldy, rows, a.in_features, a.out_features, lt_ws, stream, err,
                                      err_len);
      rc != NINFER_OK)
    return rc;
  if (!a.gated) return NINFER_OK;
  if (cudaError_t rc = launch_swiglu(proj, rows, a.out_features / 2, a.y + b * a.y_row_stride, a.y_row_stride, stream);
      rc != cudaSuccess) {
    cudaGetLastError();
    std::snprintf(err, err_len, "norm_linear/cublaslt: SwiGLU of tokens [%lld, %lld): %s", static_cast<long long>(b),
                  static_cast<long long>(b + rows), cudaGetErrorString(rc));
    return NINFER_ERR_LAUNCH;
  }
  return NINFER_OK;
}

} // namespace
} // namespace norm_linear_lt

int32_t register_norm_linear_cublaslt(const ninfer_registrar* r, char* err, size_t err_len) {
  using namespace norm_linear_lt;
  if (!find_build_resource("ninfer_norm_linear_swiglu")) {
    std::snprintf(err, err_len,
                  "norm_linear/cublaslt: kernel ninfer_norm_linear_swiglu missing from the build resource table");
    return NINFER_ERR_UNSUPPORTED;
  }
  // The norm kernel: all of the variant the planner can check.
  static const LibraryHelper norm{reinterpret_cast<const void*>(ninfer_norm_linear_rows_bf16),
                                  "ninfer_norm_linear_rows_bf16", kNormThreads};
  static ninfer_variant v{};
  const LibraryVariant spec{NINFER_OP_NORM_LINEAR, "cublaslt", 1u << NINFER_DTYPE_BF16, workspace_bytes, supports,
                            launch};
  return add_library_variant(r, v, spec, norm, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
