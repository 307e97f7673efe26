// linear on quantized weights (INT4, INT8, FP8_E4M3; ninfer/abi/ops/quant_weight.h), prompt-sized:
// `cublaslt_dequant` dequantizes W into a bf16 workspace, w = (u - zero) * scale rounded to bf16,
// and runs the `cublaslt` product on it (linear/cublaslt_product.hpp: x rounded to bf16, float32
// accumulation on the tensor cores). A prompt's GEMM is bound by the tensor cores, not by reading
// W, so the dequantization pass (codes read once, 2 bytes per weight written and read back) costs
// a few percent of a 4,096-token chunk; a handful of tokens would pay it whole, which is why the
// schedule tables send decode-sized calls to gemv_quant_mma.
//
// Rounding the dequantized weight to bf16 is this variant's departure from the contract's exact
// float32 weight, of the size (2^-9 relative) of the x rounding cublaslt already makes; any
// grouping (g_idx included) and any K % 8 == 0 shape is taken, its codes row-major or in tiles
// (quant_weight.h: the tables send decode to gemv_*_lean, which reads tiles, and prompts here).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/grid_dependency.cuh"
#include "linear/quant_common.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include <cstdio>

#include "../../cuda_variant.hpp"
#include "common/token_variant.cuh"
#include "linear/cublaslt_product.hpp"
#include "linear/variants.hpp"
#endif

namespace ninfer::cuda_plugin::dequant_bf16 {

using namespace quant;

constexpr int kThreads = 256;

// Code k of row n as float32 (exact), and its group's scale and zero; `chunk` holds the codes of
// the 8 columns from k0 (k - k0 < 8), which lie together in either layout.
template <int CODE>
__device__ __forceinline__ float weight(const Args& a, long long n, int k, int k0, const unsigned char* chunk) {
  const int g = a.g_idx ? __ldg(a.g_idx + k) : k / a.group_size;
  const long long i = n * a.groups + g;
  const float s = load_scale(a, i);
  if constexpr (CODE == kFp8) {
    float f[4];
    e4m3x4_to_float(__ldg(chunk + (k - k0)), f);
    return f[0] * s;
  } else {
    const unsigned b = __ldg(chunk + (CODE == kInt4 ? (k - k0) / 2 : k - k0));
    const unsigned u = CODE == kInt4 ? (b >> (4 * (k & 1))) & 15u : b;
    const unsigned z = a.zeros ? __ldg(a.zeros + i) : (CODE == kInt4 ? 8u : 128u);
    return (static_cast<float>(u) - static_cast<float>(z)) * s;
  }
}

// out[n][k] = bf16(w[n, k]) for the whole matrix, 8 weights (16 bytes of out) per thread,
// grid-stride. K % 8 == 0.
template <int CODE>
__device__ void dequantize(const Args& a, __nv_bfloat16* out) {
  const long long per_row = a.K / 8, total = static_cast<long long>(a.N) * per_row;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long n = i / per_row;
    const int k0 = static_cast<int>(i % per_row) * 8;
    const unsigned char* chunk = a.w + code_byte(a, n, CODE == kInt4 ? k0 / 2 : k0, tile_piece_bytes(CODE));
    uint4 v;
    u32* w = &v.x;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const __nv_bfloat162 p =
          __floats2bfloat162_rn(weight<CODE>(a, n, k0 + 2 * j, k0, chunk), weight<CODE>(a, n, k0 + 2 * j + 1, k0, chunk));
      w[j] = *reinterpret_cast<const u32*>(&p);
    }
    *reinterpret_cast<uint4*>(out + n * a.K + k0) = v;
  }
}

} // namespace ninfer::cuda_plugin::dequant_bf16

#define NINFER_DEQUANT_BF16(CODE_NAME, CODE)                                                                 \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::dequant_bf16::kThreads)                  \
      ninfer_linear_dequant_bf16_##CODE_NAME(ninfer::cuda_plugin::quant::Args a, __nv_bfloat16* out) {       \
    ninfer::cuda_plugin::grid_dependency_prologue();                                                         \
    ninfer::cuda_plugin::dequant_bf16::dequantize<ninfer::cuda_plugin::quant::CODE>(a, out);                 \
  }
NINFER_DEQUANT_BF16(int4, kInt4)
NINFER_DEQUANT_BF16(int8, kInt8)
NINFER_DEQUANT_BF16(fp8, kFp8)

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

size_t weight_bytes(const ninfer_shape* s) {
  return cublaslt_workspace_part(static_cast<size_t>(s->dims[0]) * static_cast<size_t>(s->dims[1]) * 2);
}
ninfer_shape bf16_shape(const ninfer_shape* s) { return {s->tokens, {s->dims[0], s->dims[1], 0, 0}, NINFER_DTYPE_BF16}; }

const void* const kKernels[3] = {reinterpret_cast<const void*>(ninfer_linear_dequant_bf16_int4),
                                 reinterpret_cast<const void*>(ninfer_linear_dequant_bf16_int8),
                                 reinterpret_cast<const void*>(ninfer_linear_dequant_bf16_fp8)};

// dims[3]: the codes' layout (linear.h); tiles need whole 128-column pieces.
int32_t supports(const void*, const ninfer_shape* s) {
  const bool layout = s->dims[3] == NINFER_QUANT_LAYOUT_ROWS ||
                      (s->dims[3] == NINFER_QUANT_LAYOUT_TILES16 && s->dims[0] % NINFER_QUANT_TILE_COLS == 0);
  return ninfer_dtype_is_quantized(s->dtype) && s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0 &&
         s->dims[0] % 8 == 0 && s->dims[0] <= INT32_MAX && s->dims[1] <= INT32_MAX && layout;
}

// The dequantized W, then what the bf16 product needs.
size_t workspace_bytes(const void*, const ninfer_shape* s, int64_t tokens) {
  const ninfer_shape b = bf16_shape(s);
  return weight_bytes(s) + cublaslt_workspace(&b, tokens);
}

int32_t launch(const void*, const void* args, const ninfer_launch* l, void* stream_ptr, char* err, size_t err_len) {
  const ninfer_linear_args& a = *static_cast<const ninfer_linear_args*>(args);
  const ninfer_shape s{a.tokens, {a.in_features, a.out_features, 0, a.wq ? a.wq->layout : 0}, a.w_dtype};
  const char* why = !supports(nullptr, &s)
                        ? "a quantized w_dtype, in_features % 8 == 0, and row-major codes or tiles (in_features % 128 == 0)"
                    : !a.wq || !a.wq->scales || a.wq->group_size < 1 ? "wq with scales and group_size >= 1"
                    : l->workspace_bytes < workspace_bytes(nullptr, &s, l->token_end - l->token_begin)
                        ? "the planned workspace"
                        : nullptr;
  if (why) {
    std::snprintf(err, err_len, "linear/cublaslt_dequant: needs %s", why);
    return NINFER_ERR_INVALID_ARGUMENT;
  }
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  quant::Args q = quant::make_args(a);
  auto* wb = static_cast<__nv_bfloat16*>(l->workspace);
  const long long work = static_cast<long long>(a.out_features) * (a.in_features / 8);
  const unsigned grid = static_cast<unsigned>(std::min<long long>((work + dequant_bf16::kThreads - 1) / dequant_bf16::kThreads, 65535));
  void* params[] = {&q, &wb};
  if (cudaError_t rc = launch_kernel(kKernels[quant::code_index(a.w_dtype)], dim3(grid), dim3(dequant_bf16::kThreads),
                                     params, 0, stream);
      rc != cudaSuccess) {
    cudaGetLastError();
    std::snprintf(err, err_len, "linear/cublaslt_dequant: dequantize %dx%d: %s", a.out_features, a.in_features,
                  cudaGetErrorString(rc));
    return NINFER_ERR_LAUNCH;
  }
  ninfer_linear_args b = a;
  b.w = wb;
  b.w_dtype = NINFER_DTYPE_BF16;
  b.wq = nullptr;
  const size_t wbytes = weight_bytes(&s);
  return cublaslt_product(b, l->token_begin, l->token_end, static_cast<char*>(l->workspace) + wbytes,
                          l->workspace_bytes - wbytes, stream, false, err, err_len);
}

} // namespace

int32_t register_linear_cublaslt_dequant(const ninfer_registrar* r, char* err, size_t err_len) {
  // The int4 dequantization kernel: all of the variant the planner can check.
  static const LibraryHelper dequant{kKernels[0], "ninfer_linear_dequant_bf16_int4", dequant_bf16::kThreads};
  static ninfer_variant v{};
  const uint32_t quantized = (1u << NINFER_DTYPE_INT4) | (1u << NINFER_DTYPE_INT8) | (1u << NINFER_DTYPE_FP8_E4M3);
  const LibraryVariant spec{NINFER_OP_LINEAR, "cublaslt_dequant", quantized, workspace_bytes, supports, launch};
  return add_library_variant(r, v, spec, dequant, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
