// linear, prefill-sized: the `cublaslt` variant, a cuBLASLt matrix product (contract:
// ninfer/abi/ops/linear.h).
//
//   bf16 W: the launch's x rows are rounded to bf16 into the workspace (ninfer_linear_cast_bf16,
//           the variant's helper kernel), then cublasLtMatmul bf16 x bf16 -> float32 y with
//           float32 accumulation on the tensor cores. Rounding x to bf16 is this variant's only
//           departure from the float32 contract (relative error ~2^-9 per x element, see
//           docs/cuda-pointwise-linear.md); the GEMV variants keep x in float32.
//   cublaslt_x_hi_lo (bf16 W): x split into bf16 hi + lo (hi = bf16(x), lo = bf16(x - hi)) and two
//           products accumulated in float32: ~16 significant bits of x for twice the tensor-core
//           work. On the H200 it cut the 24-layer model's per-row error vs the float32-activation
//           CPU reference from 2.7e-2 to 1.7e-2 (prompt) and 1.1e-2 to 3.6e-3 (decode), and cost
//           Qwen3-8B prefill 40% (30.3k -> 18.1k tok/s at 4096 tokens): docs/models.md.
//   f32 W:  cublasLtMatmul in plain float32 (CUBLAS_COMPUTE_32F, no TF32): exact enough for the
//           float32 fixtures, and no cast.
//
// It is a library call, not a kernel the planner sizes: the variant registers with
// NINFER_GEOMETRY_LIBRARY, so the planner makes one launch over the whole token range and the
// launch below chunks it (kChunkTokens rows per product, bounding the cast buffer) and lets
// cuBLASLt choose its grids. Row strides of x and y are honoured (ldb / ldc).
//
// a.accumulate: the first product of each chunk runs with beta = 1 and C = D = y (one layout
// for both, y's row stride included), so y += x.W^T in the library's epilogue; cublaslt_x_hi_lo's
// second product always has beta = 1. cuBLASLt supports C == D in place when the two layouts
// are the same, which they are here.
//
// The cuBLASLt handle is one per device, created at the first launch on that device and kept
// for the life of the process (plugins are never unloaded); creating it inside a CUDA-graph
// capture is refused, since handle creation may allocate and synchronise. Heuristic results
// are cached per (device, dtype, shape, strides, alignments), one per row bucket
// (ninfer/abi/row_buckets.h).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "ninfer/abi/ops/linear.h"
#include "common/grid_dependency.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include <cublasLt.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <tuple>

#include "../../cuda_variant.hpp"
#include "ninfer/abi/row_buckets.h"
#include "linear/cublaslt_product.hpp"
#include "linear/variants.hpp"
#include "common/token_variant.cuh"
#endif

namespace ninfer::cuda_plugin {
namespace {

constexpr int kCastThreads = 256;
constexpr int64_t kChunkTokens = 4096;          // rows per product: bounds the cast buffer

} // namespace
} // namespace ninfer::cuda_plugin

// out[r][k] = bf16(x[r * stride + k]) for r < rows, k < K; 8 elements per thread, grid-stride.
// With `lo`: also lo[r][k] = bf16(x - out), the part of x that bf16 dropped (cublaslt_x_hi_lo).
extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kCastThreads)
    ninfer_linear_cast_bf16(const float* x, int64_t stride, int64_t rows, int32_t K, __nv_bfloat16* out,
                            __nv_bfloat16* lo) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  const int64_t per_row = K / 8; // K % 8 == 0 (the variant supports only such shapes)
  const int64_t n = rows * per_row;
  const bool vec = stride % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / per_row, k = (i % per_row) * 8;
    const float* src = x + r * stride + k;
    float f[8];
    if (vec) {
      const float4 a = __ldg(reinterpret_cast<const float4*>(src));
      const float4 b = __ldg(reinterpret_cast<const float4*>(src + 4));
      f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
    } else {
      for (int j = 0; j < 8; ++j) f[j] = src[j];
    }
    uint4 v, vl;
    uint32_t* w = &v.x;
    uint32_t* wl = &vl.x;
    for (int j = 0; j < 4; ++j) {
      const __nv_bfloat162 p = __floats2bfloat162_rn(f[2 * j], f[2 * j + 1]);
      w[j] = *reinterpret_cast<const uint32_t*>(&p);
      const float2 back = __bfloat1622float2(p);
      const __nv_bfloat162 q = __floats2bfloat162_rn(f[2 * j] - back.x, f[2 * j + 1] - back.y);
      wl[j] = *reinterpret_cast<const uint32_t*>(&q);
    }
    *reinterpret_cast<uint4*>(out + r * K + k) = v; // out rows are K * 2 bytes, a multiple of 16
    if (lo) *reinterpret_cast<uint4*>(lo + r * K + k) = vl;
  }
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

// The library never sees more rows a call than the row buckets cover (ninfer-serve's warm-up).
static_assert(kChunkTokens == NINFER_ROW_BUCKET_MOST);

const char* lt_status(cublasStatus_t s) { return cublasLtGetStatusString(s); }

// One handle per device ordinal, created on first use outside graph capture.
int32_t lt_handle(cudaStream_t stream, cublasLtHandle_t* out, char* err, size_t err_len) {
  static std::mutex mu;
  static std::map<int, cublasLtHandle_t> handles;
  int device = 0;
  if (cudaError_t rc = cudaGetDevice(&device); rc != cudaSuccess) {
    std::snprintf(err, err_len, "linear/cublaslt: cudaGetDevice: %s", cudaGetErrorString(rc));
    return NINFER_ERR_LAUNCH;
  }
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = handles.find(device); it != handles.end()) {
    *out = it->second;
    return NINFER_OK;
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) == cudaSuccess && capture != cudaStreamCaptureStatusNone) {
    std::snprintf(err, err_len,
                  "linear/cublaslt: first use on device %d inside a CUDA-graph capture; run it once eagerly "
                  "before capturing (creating the cuBLASLt handle may allocate and synchronise)",
                  device);
    return NINFER_ERR_LAUNCH;
  }
  cublasLtHandle_t h = nullptr;
  if (cublasStatus_t s = cublasLtCreate(&h); s != CUBLAS_STATUS_SUCCESS) {
    std::snprintf(err, err_len, "linear/cublaslt: cublasLtCreate on device %d: %s", device, lt_status(s));
    return NINFER_ERR_LAUNCH;
  }
  handles.emplace(device, h); // kept for the life of the process, like the plugin
  *out = h;
  return NINFER_OK;
}

uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && a % al != 0) al /= 2;
  return al;
}

// Owns the descriptors of one product.
struct LtProduct {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtProduct() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// y[rows, N] (ld ldy) = B[rows, K] (ld ldb) . W[N, K]^T + beta y, in cuBLASLt's column-major
// terms D (N x rows) = op(A)^T B + beta C with A = W as a K x N matrix (ld K), B as K x rows and
// C = D = y under one layout (N x rows, ld ldy).
int32_t lt_matmul(cublasLtHandle_t h, cudaStream_t stream, cudaDataType_t in_type, const void* w, const void* bmat,
                  int64_t ldb, float* y, int64_t ldy, int64_t rows, int32_t K, int32_t N, void* ws, size_t ws_bytes,
                  char* err, size_t err_len, float beta = 0.f) {
  LtProduct p;
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  const uint32_t al_a = alignment_of(w), al_b = alignment_of(bmat), al_c = alignment_of(y);
  const size_t ws_size = ws_bytes;
  cublasStatus_t s = cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&p.a, in_type, K, N, K);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&p.b, in_type, K, rows, ldb);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, N, rows, ldy);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulPreferenceCreate(&p.pref);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulPreferenceSetAttribute(p.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_size, sizeof ws_size);
  // cuBLASLt assumes 256-byte aligned matrices unless told otherwise.
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulPreferenceSetAttribute(p.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulPreferenceSetAttribute(p.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulPreferenceSetAttribute(p.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulPreferenceSetAttribute(p.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c);
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::snprintf(err, err_len, "linear/cublaslt: descriptors for %lldx%dx%d: %s", static_cast<long long>(rows), N, K,
                  lt_status(s));
    return NINFER_ERR_LAUNCH;
  }

  // The heuristic's first choice for the row bucket's top count (ninfer/abi/row_buckets.h),
  // cached per bucket and per count: a count met for the first time would otherwise pay a
  // heuristic query and maybe a kernel's first load before its pass can end. A count below its
  // bucket's top takes that choice where cublasLtMatmulAlgoCheck accepts it, else its own.
  using Key = std::tuple<int, int, int64_t, int32_t, int32_t, int64_t, int64_t, uint32_t, uint32_t, uint32_t, size_t>;
  static std::mutex mu;
  static std::map<Key, cublasLtMatmulAlgo_t> algos;
  int device = 0;
  cudaGetDevice(&device);
  const auto key_for = [&](int64_t r) {
    return Key{device, static_cast<int>(in_type), r, K, N, ldb, ldy, al_a, al_b, al_c, ws_size};
  };
  const auto heuristic = [&](cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatmulAlgo_t* out) {
    cublasLtMatmulHeuristicResult_t r{};
    int found = 0;
    s = cublasLtMatmulAlgoGetHeuristic(h, p.op, p.a, b, c, c, p.pref, 1, &r, &found);
    if (s != CUBLAS_STATUS_SUCCESS || found == 0) return false;
    *out = r.algo;
    return true;
  };
  cublasLtMatmulAlgo_t algo{};
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = algos.find(key_for(rows));
    if (it == algos.end()) {
      const int64_t top = ninfer_row_bucket(rows);
      bool have = false;
      if (top != rows) {
        auto bt = algos.find(key_for(top));
        if (bt == algos.end()) {
          LtProduct q; // the top count's layouts
          cublasLtMatmulAlgo_t a{};
          if (cublasLtMatrixLayoutCreate(&q.b, in_type, K, top, ldb) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&q.c, CUDA_R_32F, N, top, ldy) == CUBLAS_STATUS_SUCCESS &&
              heuristic(q.b, q.c, &a))
            bt = algos.emplace(key_for(top), a).first;
        }
        cublasLtMatmulHeuristicResult_t check{};
        if (bt != algos.end() &&
            cublasLtMatmulAlgoCheck(h, p.op, p.a, p.b, p.c, p.c, &bt->second, &check) == CUBLAS_STATUS_SUCCESS &&
            check.workspaceSize <= ws_size) {
          algo = bt->second;
          have = true;
        }
      }
      if (!have && !heuristic(p.b, p.c, &algo)) {
        std::snprintf(err, err_len,
                      "linear/cublaslt: no cuBLASLt algorithm for %lldx%dx%d (ldb %lld, ldy %lld, alignments %u/%u/%u "
                      "B): %s",
                      static_cast<long long>(rows), N, K, static_cast<long long>(ldb), static_cast<long long>(ldy),
                      al_a, al_b, al_c, s != CUBLAS_STATUS_SUCCESS ? lt_status(s) : "none found");
        return NINFER_ERR_UNSUPPORTED;
      }
      it = algos.emplace(key_for(rows), algo).first;
    }
    algo = it->second;
  }
  const float one = 1.f; // beta 0: y is not read (it may hold anything); 1: y accumulates
  s = cublasLtMatmul(h, p.op, &one, w, p.a, bmat, p.b, &beta, y, p.c, y, p.c, &algo, ws, ws_size, stream);
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::snprintf(err, err_len, "linear/cublaslt: cublasLtMatmul %lldx%dx%d: %s", static_cast<long long>(rows), N, K,
                  lt_status(s));
    return NINFER_ERR_LAUNCH;
  }
  return NINFER_OK;
}

int32_t supports(const void*, const ninfer_shape* s) {
  // 16-byte W rows (and cast rows) only: what the fast cuBLASLt kernels take and every model has.
  const int64_t vec = s->dtype == NINFER_DTYPE_BF16 ? 8 : 4;
  return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0 && s->dims[0] % vec == 0;
}

size_t cast_bytes(const ninfer_shape* s, int64_t tokens) {
  if (s->dtype != NINFER_DTYPE_BF16) return 0;
  const int64_t rows = tokens < kChunkTokens ? tokens : kChunkTokens;
  return cublaslt_workspace_part(static_cast<size_t>(rows) * static_cast<size_t>(s->dims[0]) * 2);
}

size_t workspace_bytes(const void*, const ninfer_shape* s, int64_t tokens) {
  return cast_bytes(s, tokens) + kCublasLtWorkspaceBytes;
}
// cublaslt_x_hi_lo: a second cast buffer for the low halves.
size_t workspace_bytes_x_hi_lo(const void*, const ninfer_shape* s, int64_t tokens) {
  return 2 * cast_bytes(s, tokens) + kCublasLtWorkspaceBytes;
}

// split: x = hi + lo, both bf16, and y = hi.W^T + lo.W^T in two products (float32 output,
// accumulated by the second): the activation keeps ~16 significant bits instead of 8, for twice
// the tensor-core work. Without split: one product on x rounded to bf16.
int32_t launch_impl(const void* args, const ninfer_launch* l, void* stream_ptr, char* err, size_t err_len,
                    bool split) {
  const ninfer_linear_args& a = *static_cast<const ninfer_linear_args*>(args);
  if (const char* why = linear_args_invalid(a, *l, nullptr)) {
    std::snprintf(err, err_len, "linear/cublaslt: %s", why);
    return NINFER_ERR_INVALID_ARGUMENT;
  }
  const ninfer_shape shape{a.tokens, {a.in_features, a.out_features, 0, 0}, a.w_dtype};
  if (!supports(nullptr, &shape)) {
    std::snprintf(err, err_len, "linear/cublaslt: in_features %d is not a multiple of %d", a.in_features,
                  a.w_dtype == NINFER_DTYPE_BF16 ? 8 : 4);
    return NINFER_ERR_INVALID_ARGUMENT;
  }
  return cublaslt_product(a, l->token_begin, l->token_end, l->workspace, l->workspace_bytes,
                          static_cast<cudaStream_t>(stream_ptr), split, err, err_len);
}

} // namespace

size_t cublaslt_workspace(const ninfer_shape* s, int64_t tokens) { return workspace_bytes(nullptr, s, tokens); }

int32_t cublaslt_product(const ninfer_linear_args& a, int64_t b0, int64_t e0, void* workspace, size_t workspace_size,
                         cudaStream_t stream, bool split, char* err, size_t err_len) {
  const ninfer_shape shape{a.tokens, {a.in_features, a.out_features, 0, 0}, a.w_dtype};
  const size_t one_cast = cast_bytes(&shape, e0 - b0), cast = split ? 2 * one_cast : one_cast;
  if (!workspace || workspace_size < cast + kCublasLtWorkspaceBytes) {
    std::snprintf(err, err_len, "linear/cublaslt: workspace of %zu bytes, %zu needed", workspace_size,
                  cast + kCublasLtWorkspaceBytes);
    return NINFER_ERR_INVALID_ARGUMENT;
  }
  cublasLtHandle_t h = nullptr;
  if (int32_t rc = lt_handle(stream, &h, err, err_len); rc != NINFER_OK) return rc;
  char* ws = static_cast<char*>(workspace);
  void* lt_ws = ws + cast;
  const int K = a.in_features, N = a.out_features;

  const float beta = a.accumulate ? 1.f : 0.f; // of each chunk's (first) product

  if (a.w_dtype == NINFER_DTYPE_F32)
    return lt_matmul(h, stream, CUDA_R_32F, a.w, a.x + b0 * a.x_row_stride, a.x_row_stride,
                     a.y + b0 * a.y_row_stride, a.y_row_stride, e0 - b0, K, N, lt_ws, kCublasLtWorkspaceBytes, err,
                     err_len, beta);

  auto* xb = reinterpret_cast<__nv_bfloat16*>(ws);
  auto* xlo = split ? reinterpret_cast<__nv_bfloat16*>(ws + one_cast) : nullptr;
  for (int64_t b = b0; b < e0; b += kChunkTokens) {
    const int64_t rows = e0 - b < kChunkTokens ? e0 - b : kChunkTokens;
    const int64_t work = rows * (K / 8);
    const int64_t blocks = (work + kCastThreads - 1) / kCastThreads;
    const unsigned grid = static_cast<unsigned>(blocks < 65535 ? blocks : 65535); // grid-stride beyond
    const float* x = a.x + b * a.x_row_stride;
    int64_t stride = a.x_row_stride;
    int32_t k = K;
    int64_t n = rows;
    void* params[] = {&x, &stride, &n, &k, &xb, &xlo};
    if (cudaError_t rc = launch_kernel(reinterpret_cast<const void*>(ninfer_linear_cast_bf16), dim3(grid),
                                       dim3(kCastThreads), params, 0, stream);
        rc != cudaSuccess) {
      cudaGetLastError();
      std::snprintf(err, err_len, "linear/cublaslt: cast of tokens [%lld, %lld): %s", static_cast<long long>(b),
                    static_cast<long long>(b + rows), cudaGetErrorString(rc));
      return NINFER_ERR_LAUNCH;
    }
    if (int32_t rc = lt_matmul(h, stream, CUDA_R_16BF, a.w, xb, K, a.y + b * a.y_row_stride, a.y_row_stride, rows, K,
                               N, lt_ws, kCublasLtWorkspaceBytes, err, err_len, beta);
        rc != NINFER_OK)
      return rc;
    if (split) {
      if (int32_t rc = lt_matmul(h, stream, CUDA_R_16BF, a.w, xlo, K, a.y + b * a.y_row_stride, a.y_row_stride, rows,
                                 K, N, lt_ws, kCublasLtWorkspaceBytes, err, err_len, 1.f);
          rc != NINFER_OK)
        return rc;
    }
  }
  return NINFER_OK;
}

int32_t cublaslt_bf16_rows(const void* xb, const void* w, float* y, int64_t ldy, int64_t rows, int32_t K, int32_t N,
                           void* lt_workspace, cudaStream_t stream, char* err, size_t err_len) {
  cublasLtHandle_t h = nullptr;
  if (int32_t rc = lt_handle(stream, &h, err, err_len); rc != NINFER_OK) return rc;
  return lt_matmul(h, stream, CUDA_R_16BF, w, xb, K, y, ldy, rows, K, N, lt_workspace, kCublasLtWorkspaceBytes, err,
                   err_len);
}

namespace {

int32_t launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  return launch_impl(args, l, stream, err, err_len, false);
}
int32_t launch_x_hi_lo(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  return launch_impl(args, l, stream, err, err_len, true);
}

} // namespace

int32_t register_linear_cublaslt(const ninfer_registrar* r, char* err, size_t err_len) {
  // The cast kernel: all of the variants the planner can check.
  static const LibraryHelper cast{reinterpret_cast<const void*>(ninfer_linear_cast_bf16), "ninfer_linear_cast_bf16",
                                  kCastThreads};
  static ninfer_variant v{}, hi_lo{};
  const LibraryVariant plain{NINFER_OP_LINEAR, "cublaslt", kF32OrBf16Mask, workspace_bytes, supports, launch};
  if (int32_t rc = add_library_variant(r, v, plain, cast, err, err_len); rc != NINFER_OK) return rc;
  // The same with the activation split into bf16 hi + lo: float32-accurate products on the
  // tensor cores at twice their work (the float32-weight path is the same as cublaslt's).
  const LibraryVariant split{NINFER_OP_LINEAR, "cublaslt_x_hi_lo", kF32OrBf16Mask, workspace_bytes_x_hi_lo,
                             supports, launch_x_hi_lo};
  return add_library_variant(r, hi_lo, split, cast, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
