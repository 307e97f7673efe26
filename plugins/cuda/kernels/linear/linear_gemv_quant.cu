// linear on quantized weights for decode-sized token counts (contract: ninfer/abi/ops/linear.h;
// the weights in the canonical layout of ninfer/abi/ops/quant_weight.h: INT4, INT8, FP8_E4M3).
//   gemv_quant_warp_t1 / _t2 / _t4 / _t8: 128 threads, 4 weight rows per warp (2 for _t8), one
//   CTA per 16 (8) rows; a CTA does up to 1, 2, 4 or 8 tokens (T = 1, 2, 3-4, 5 and more), so every weight byte
//   is read once per launch up to 8 tokens (beyond, once per tile of 8: prompts run, slowly).
// Each lane loads 16 bytes of codes of each of its warp's rows at a time (32 int4 or 16 int8 /
// fp8 codes), dequantizes them in registers, (u - zero) * scale (fp8: e4m3(u) * scale, the
// conversion in hardware on sm_89 and newer), and accumulates float32 sums with x read through
// L1 (the warp's rows share each x load); the warp adds its lanes' sums with shuffles and lane
// 0 stores (y += with `accumulate`). The dequantized weight is exactly the contract's, so only
// the float32 summation order differs from the CPU plugin.
//
// Paths, chosen per launch from the arguments (one branch per launch, uniform over the grid):
//   - codes: 16-byte loads when a row is whole 16-byte vectors and w is 16-byte aligned, else
//     4-byte loads (supports() requires rows of whole 4-byte words: int4 K % 8, int8 / fp8 K % 4);
//   - groups: one scale (and zero) per load when there is no g_idx and group_size is a multiple
//     of the codes one load holds; otherwise 4-byte loads and each code looks up its own group
//     (g_idx or k / group_size): correct for act-order GPTQ and odd group sizes, but slower;
//   - x: float4 loads when its rows are 16-byte aligned, scalar loads otherwise.
// Not here yet: tensor cores for small batches and prompts, a kernel-specific repacked layout,
// and weight prefetch before the launch wait (docs/quantization.md, "CUDA").
#include <cuda_runtime.h>

#include <cstdint>

#include "common/grid_dependency.cuh"
#include "ninfer/abi/ops/linear.h"
#include "ninfer/abi/plugin_abi.h" // the dtype enum

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include <cstdio>

#include "../../cuda_variant.hpp"
#include "linear/variants.hpp"
#include "common/token_variant.cuh"
#endif

namespace ninfer::cuda_plugin::gemv_quant {

typedef unsigned int u32;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

enum Code { kInt4 = 0, kInt8 = 1, kFp8 = 2 };

// The kernel's parameter: the linear call with its weight description (`wq` is host memory,
// read by the launch).
struct Args {
  const float* x;
  long long x_stride;
  const unsigned char* w;
  float* y;
  long long y_stride;
  const void* scales;
  const unsigned char* zeros; // nullptr: symmetric
  const int* g_idx;           // nullptr: k / group_size
  int K, N, row_bytes, groups, group_size, scale_dtype, accumulate;
};

template <int CODE>
struct CodeTraits {
  static constexpr int per_word = CODE == kInt4 ? 8 : 4; // codes per 32-bit word
  static constexpr float symmetric_zero = CODE == kInt4 ? 8.f : CODE == kInt8 ? 128.f : 0.f;
};

__device__ __forceinline__ float f16_to_float(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

__device__ __forceinline__ float load_scale(const Args& a, long long i) {
  if (a.scale_dtype == NINFER_DTYPE_F32) return __ldg(static_cast<const float*>(a.scales) + i);
  const unsigned short h = __ldg(static_cast<const unsigned short*>(a.scales) + i);
  return a.scale_dtype == NINFER_DTYPE_BF16 ? __uint_as_float(static_cast<u32>(h) << 16) : f16_to_float(h);
}

// 2^23 + v for an integer code v < 2^23: its float32 bits are 0x4B000000 | v, so decoding is a
// bit operation, and (2^23 + u) - (2^23 + zero) = u - zero exactly.
constexpr float kMagic = 8388608.f;

// The scale and the bias subtracted from a decoded code ((2^23 + zero) for integers, 0 for fp8)
// of row n, group g.
template <int CODE>
__device__ __forceinline__ void group_params(const Args& a, long long n, int g, float& s, float& bias) {
  const long long i = n * a.groups + g;
  s = load_scale(a, i);
  if constexpr (CODE == kFp8) {
    bias = 0.f;
  } else {
    const float z = a.zeros ? static_cast<float>(__ldg(a.zeros + i)) : CodeTraits<CODE>::symmetric_zero;
    bias = kMagic + z;
  }
}

// e4m3fn bytes of a word as float32, in k order (byte 0 first).
__device__ __forceinline__ void e4m3x4_to_float(u32 w, float (&f)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  u32 lo, hi;
  asm("{\n .reg .b16 a, b;\n mov.b32 {a, b}, %2;\n cvt.rn.f16x2.e4m3x2 %0, a;\n cvt.rn.f16x2.e4m3x2 %1, b;\n}"
      : "=r"(lo), "=r"(hi)
      : "r"(w));
  f[0] = f16_to_float(static_cast<unsigned short>(lo & 0xffffu));
  f[1] = f16_to_float(static_cast<unsigned short>(lo >> 16));
  f[2] = f16_to_float(static_cast<unsigned short>(hi & 0xffffu));
  f[3] = f16_to_float(static_cast<unsigned short>(hi >> 16));
#else
  // No fp8 conversion instruction before sm_89: the bits, exactly (subnormals m * 2^-9).
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const u32 b = (w >> (8 * i)) & 0xffu, e = (b >> 3) & 15u, m = b & 7u;
    float v;
    if (e == 15u && m == 7u) v = __uint_as_float(0x7fc00000u);
    else if (e == 0u) v = static_cast<float>(m) * 0.001953125f;
    else v = __uint_as_float(((e + 120u) << 23) | (m << 20));
    f[i] = (b & 0x80u) ? -v : v;
  }
#endif
}

// The codes of one word as floats: 2^23 + u for integers, the e4m3 value for fp8.
template <int CODE>
__device__ __forceinline__ void decode_word(u32 w, float (&f)[CodeTraits<CODE>::per_word]) {
  if constexpr (CODE == kInt4) {
#pragma unroll
    for (int i = 0; i < 8; ++i) f[i] = __uint_as_float(0x4B000000u | ((w >> (4 * i)) & 15u));
  } else if constexpr (CODE == kInt8) {
#pragma unroll
    for (int i = 0; i < 4; ++i) f[i] = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7540u | i));
  } else {
    e4m3x4_to_float(w, f);
  }
}

template <int WORDS>
__device__ __forceinline__ void load_codes(const unsigned char* p, u32 (&c)[WORDS]) {
  if constexpr (WORDS == 4) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
    c[0] = v.x, c[1] = v.y, c[2] = v.z, c[3] = v.w;
  } else {
    static_assert(WORDS == 1, "loads of 16 or 4 bytes");
    c[0] = __ldg(reinterpret_cast<const u32*>(p));
  }
}

// N floats of x at p (N = 4 or 8): float4 loads when x rows are 16-byte aligned.
template <int N>
__device__ __forceinline__ void load_x(const float* p, bool vec, float (&v)[N]) {
  if (vec) {
#pragma unroll
    for (int i = 0; i < N / 4; ++i) {
      const float4 q = __ldg(reinterpret_cast<const float4*>(p) + i);
      v[4 * i] = q.x, v[4 * i + 1] = q.y, v[4 * i + 2] = q.z, v[4 * i + 3] = q.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = __ldg(p + i);
  }
}

// acc[r][t] += the lane's share of row n[r] times token t's x, in loads of WORDS words. With
// CODE_GROUPS each code looks up its own group (g_idx, or group sizes that split a load);
// otherwise one group covers each load (no g_idx, group_size a multiple of the load's codes).
template <int CODE, int TOKENS, int ROWS, int WORDS, bool CODE_GROUPS>
__device__ __forceinline__ void dot_rows(const Args& a, const unsigned char* const (&rows)[ROWS],
                                         const long long (&n)[ROWS], const float* const (&xr)[TOKENS], bool x_vec,
                                         float (&acc)[ROWS][TOKENS]) {
  constexpr int kPerWord = CodeTraits<CODE>::per_word;
  constexpr int kPerLoad = WORDS * kPerWord;
  const int lane = threadIdx.x & 31;
  const int loads = a.row_bytes / (4 * WORDS);
  for (int u = lane; u < loads; u += 32) {
    u32 c[ROWS][WORDS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) load_codes<WORDS>(rows[r] + static_cast<long long>(u) * 4 * WORDS, c[r]);
    const int k0 = u * kPerLoad;
    float s[ROWS], bias[ROWS];
    if constexpr (!CODE_GROUPS) {
#pragma unroll
      for (int r = 0; r < ROWS; ++r) group_params<CODE>(a, n[r], k0 / a.group_size, s[r], bias[r]);
    }
#pragma unroll
    for (int j = 0; j < WORDS; ++j) {
      const int kw = k0 + j * kPerWord;
      float wv[ROWS][kPerWord];
#pragma unroll
      for (int r = 0; r < ROWS; ++r) decode_word<CODE>(c[r][j], wv[r]);
#pragma unroll
      for (int i = 0; i < kPerWord; ++i) {
        if constexpr (CODE_GROUPS) {
          const int g = a.g_idx ? __ldg(a.g_idx + kw + i) : (kw + i) / a.group_size;
#pragma unroll
          for (int r = 0; r < ROWS; ++r) group_params<CODE>(a, n[r], g, s[r], bias[r]);
        }
#pragma unroll
        for (int r = 0; r < ROWS; ++r) wv[r][i] = (wv[r][i] - bias[r]) * s[r];
      }
#pragma unroll
      for (int t = 0; t < TOKENS; ++t) {
        float xv[kPerWord];
        load_x<kPerWord>(xr[t] + kw, x_vec, xv);
#pragma unroll
        for (int r = 0; r < ROWS; ++r)
#pragma unroll
          for (int i = 0; i < kPerWord; ++i) acc[r][t] = fmaf(xv[i], wv[r][i], acc[r][t]);
      }
    }
  }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Weight rows per warp: each x load feeds them all; 8 tokens' sums leave room for two.
template <int TOKENS>
constexpr int kRowsPerWarp = TOKENS >= 8 ? 2 : 4;
template <int TOKENS>
constexpr int kRowsPerCta = kWarps * kRowsPerWarp<TOKENS>;

template <int CODE, int TOKENS>
__device__ __forceinline__ void gemv(const Args& a, long long begin, long long end) {
  constexpr int ROWS = kRowsPerWarp<TOKENS>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long long n0 = (static_cast<long long>(blockIdx.x) * kWarps + warp) * ROWS;
  if (n0 >= a.N) return; // nothing below synchronises the CTA
  const unsigned char* rows[ROWS];
  long long n[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    n[r] = n0 + r < a.N ? n0 + r : a.N - 1; // clamped: computed, never stored
    rows[r] = a.w + n[r] * a.row_bytes;
  }
  constexpr int kPer16 = 4 * CodeTraits<CODE>::per_word;
  const bool wide = a.row_bytes % 16 == 0 && reinterpret_cast<unsigned long long>(a.w) % 16 == 0;
  const int per_load = wide ? kPer16 : CodeTraits<CODE>::per_word;
  const bool code_groups = a.g_idx != nullptr || a.group_size % per_load != 0;
  const bool x_vec = reinterpret_cast<unsigned long long>(a.x) % 16 == 0 && a.x_stride % 4 == 0;
  const long long tiles = (end - begin + TOKENS - 1) / TOKENS;
  for (long long tile = blockIdx.y; tile < tiles; tile += gridDim.y) {
    const long long t0 = begin + tile * TOKENS;
    const int nt = static_cast<int>(end - t0 < TOKENS ? end - t0 : TOKENS);
    const float* xr[TOKENS];
#pragma unroll
    for (int t = 0; t < TOKENS; ++t) xr[t] = a.x + (t0 + (t < nt ? t : nt - 1)) * a.x_stride; // re-read, never stored
    float acc[ROWS][TOKENS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
      for (int t = 0; t < TOKENS; ++t) acc[r][t] = 0.f;
    if (code_groups) dot_rows<CODE, TOKENS, ROWS, 1, true>(a, rows, n, xr, x_vec, acc);
    else if (wide) dot_rows<CODE, TOKENS, ROWS, 4, false>(a, rows, n, xr, x_vec, acc);
    else dot_rows<CODE, TOKENS, ROWS, 1, false>(a, rows, n, xr, x_vec, acc);
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
      for (int t = 0; t < TOKENS; ++t) {
        const float v = warp_sum(acc[r][t]);
        if (lane == 0 && n0 + r < a.N && t < nt) {
          float* yp = a.y + (t0 + t) * a.y_stride + n0 + r;
          *yp = a.accumulate ? *yp + v : v;
        }
      }
  }
}

} // namespace ninfer::cuda_plugin::gemv_quant

#define NINFER_GEMV_QUANT(TOKENS, CODE_NAME, CODE)                                                         \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::gemv_quant::kThreads)                  \
      ninfer_linear_gemv_quant_warp_t##TOKENS##_##CODE_NAME(ninfer::cuda_plugin::gemv_quant::Args a,       \
                                                            long long b, long long e) {                    \
    ninfer::cuda_plugin::grid_dependency_prologue();                                                       \
    ninfer::cuda_plugin::gemv_quant::gemv<ninfer::cuda_plugin::gemv_quant::CODE, TOKENS>(a, b, e);         \
  }
#define NINFER_GEMV_QUANT_CODES(TOKENS)                                                                    \
  NINFER_GEMV_QUANT(TOKENS, int4, kInt4)                                                                   \
  NINFER_GEMV_QUANT(TOKENS, int8, kInt8)                                                                   \
  NINFER_GEMV_QUANT(TOKENS, fp8, kFp8)

NINFER_GEMV_QUANT_CODES(1)
NINFER_GEMV_QUANT_CODES(2)
NINFER_GEMV_QUANT_CODES(4)
NINFER_GEMV_QUANT_CODES(8)

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

struct QuantKernel {
  const char* symbol;
  const void* fn;
};

// One variant per token tile: the kernels of the three code dtypes, chosen per call from w_dtype.
// Not TokenVariant (common/token_variant.cuh): the kernels take the weights' description by
// value (Args), read from the host struct `wq` points at, and there are three of them.
template <int TOKENS>
struct GemvQuantVariant {
  static const char* name();
  static const QuantKernel* kernels(); // int4, int8, fp8
  static inline const QuantKernel* planned = nullptr; // the one needing the most registers

  static int64_t min_tokens() { return TOKENS == 1 ? 1 : TOKENS / 2 + 1; }

  // Its own token range (1, 2, 3-4, 5 and more: the planner's own route prefers the variant of
  // most tokens per CTA, which must not do 8 tokens' arithmetic for one), rows of whole 4-byte
  // words (int4: K % 8 == 0; int8, fp8: K % 4 == 0), and int32 sizes.
  static int32_t supports(const void*, const ninfer_shape* s) {
    if (!ninfer_dtype_is_quantized(s->dtype)) return 0;
    if (s->tokens < min_tokens() || (TOKENS < 8 && s->tokens > TOKENS)) return 0;
    const int64_t K = s->dims[0], N = s->dims[1];
    if (K < 1 || N < 1 || K > INT32_MAX || N > INT32_MAX) return 0;
    return K % (s->dtype == NINFER_DTYPE_INT4 ? 8 : 4) == 0;
  }

  static const char* invalid(const ninfer_linear_args& a) {
    if (!ninfer_dtype_is_quantized(a.w_dtype)) return "w_dtype must be INT4, INT8 or FP8_E4M3";
    if (a.in_features < 1 || a.out_features < 1) return "in_features and out_features must be >= 1";
    if (a.in_features % (a.w_dtype == NINFER_DTYPE_INT4 ? 8 : 4) != 0)
      return "rows must be whole 4-byte words (in_features % 8 for int4, % 4 for int8 and fp8)";
    if (reinterpret_cast<uintptr_t>(a.w) % 4 != 0) return "w must be 4-byte aligned";
    if (!a.wq || !a.wq->scales) return "a quantized w_dtype needs wq with scales";
    if (a.wq->group_size < 1) return "wq->group_size must be >= 1";
    const int32_t sd = a.wq->scale_dtype;
    if (sd != NINFER_DTYPE_F32 && sd != NINFER_DTYPE_BF16 && sd != NINFER_DTYPE_F16)
      return "wq->scale_dtype must be F32, BF16 or F16";
    if (a.w_dtype == NINFER_DTYPE_FP8_E4M3 && a.wq->zeros) return "FP8_E4M3 weights take no zero points";
    return nullptr;
  }

  static int32_t launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err,
                        size_t err_len) {
    const ninfer_linear_args& a = *static_cast<const ninfer_linear_args*>(args);
    if (const char* why = invalid(a)) {
      std::snprintf(err, err_len, "%s/%s: %s", NINFER_OP_LINEAR, name(), why);
      return NINFER_ERR_INVALID_ARGUMENT;
    }
    const int32_t K = a.in_features;
    const int32_t row_bytes = a.w_dtype == NINFER_DTYPE_INT4 ? K / 2 : K;
    gemv_quant::Args q{a.x,
                       a.x_row_stride,
                       static_cast<const unsigned char*>(a.w),
                       a.y,
                       a.y_row_stride,
                       a.wq->scales,
                       a.wq->zeros,
                       a.wq->g_idx,
                       K,
                       a.out_features,
                       row_bytes,
                       (K + a.wq->group_size - 1) / a.wq->group_size,
                       a.wq->group_size,
                       a.wq->scale_dtype,
                       a.accumulate};
    const QuantKernel& k = kernels()[a.w_dtype == NINFER_DTYPE_INT4 ? 0 : a.w_dtype == NINFER_DTYPE_INT8 ? 1 : 2];
    long long b = l->token_begin, e = l->token_end;
    // grid.x: blocks of rows (from the shape alone); grid.y: the planner's token tiles.
    const dim3 grid = linear_grid(a.out_features, gemv_quant::kRowsPerCta<TOKENS>, l->grid_x);
    void* params[] = {&q, &b, &e};
    const cudaError_t rc = launch_kernel(k.fn, grid, dim3(l->block), params, 0, static_cast<cudaStream_t>(stream));
    if (rc != cudaSuccess) {
      std::snprintf(err, err_len, "%s/%s: launch grid (%u,%u) block %d tokens [%lld,%lld): %s", NINFER_OP_LINEAR,
                    name(), grid.x, grid.y, l->block, b, e, cudaGetErrorString(rc));
      cudaGetLastError(); // a failed launch must not poison the next call's error check
      return NINFER_ERR_LAUNCH;
    }
    return NINFER_OK;
  }

  static int32_t query(const void*, ninfer_kernel_resources* out, char* err, size_t err_len) {
    return query_kernel_attributes(planned->fn, planned->symbol, gemv_quant::kThreads, out, err, err_len);
  }

  static int32_t driver_blocks(const void*, size_t dyn, int32_t* blocks, char* err, size_t err_len) {
    return query_driver_blocks(planned->fn, gemv_quant::kThreads, dyn, blocks, err, err_len);
  }

  static int32_t add(const ninfer_registrar* r, ninfer_variant& v, char* err, size_t err_len) {
    const BuildResource* most = nullptr;
    for (int i = 0; i < 3; ++i) {
      const BuildResource* res = find_build_resource(kernels()[i].symbol);
      if (!res) {
        std::snprintf(err, err_len, "%s/%s: kernel %s missing from the build resource table", NINFER_OP_LINEAR,
                      name(), kernels()[i].symbol);
        return NINFER_ERR_UNSUPPORTED;
      }
      if (!most || res->registers > most->registers) {
        most = res;
        planned = &kernels()[i];
      }
    }
    v = ninfer_variant{};
    v.op = NINFER_OP_LINEAR;
    v.name = name();
    v.exec = NINFER_EXEC_CUDA;
    v.geometry = NINFER_GEOMETRY_TOKEN_TILED;
    v.split_k = 1;
    v.tokens_per_cta = TOKENS;
    v.dtype_mask = (1u << NINFER_DTYPE_INT4) | (1u << NINFER_DTYPE_INT8) | (1u << NINFER_DTYPE_FP8_E4M3);
    v.resources = make_resources(*most, gemv_quant::kThreads);
    v.supports = supports;
    v.launch = launch;
    v.query_loaded_resources = query;
    v.query_driver_blocks_per_sm = driver_blocks;
    return r->add_variant(r->ctx, &v);
  }
};

#define NINFER_GEMV_QUANT_VARIANT(TOKENS)                                                                  \
  template <>                                                                                              \
  const char* GemvQuantVariant<TOKENS>::name() {                                                           \
    return "gemv_quant_warp_t" #TOKENS;                                                                    \
  }                                                                                                        \
  template <>                                                                                              \
  const QuantKernel* GemvQuantVariant<TOKENS>::kernels() {                                                 \
    static const QuantKernel k[3] = {                                                                      \
        {"ninfer_linear_gemv_quant_warp_t" #TOKENS "_int4",                                                \
         reinterpret_cast<const void*>(ninfer_linear_gemv_quant_warp_t##TOKENS##_int4)},                   \
        {"ninfer_linear_gemv_quant_warp_t" #TOKENS "_int8",                                                \
         reinterpret_cast<const void*>(ninfer_linear_gemv_quant_warp_t##TOKENS##_int8)},                   \
        {"ninfer_linear_gemv_quant_warp_t" #TOKENS "_fp8",                                                 \
         reinterpret_cast<const void*>(ninfer_linear_gemv_quant_warp_t##TOKENS##_fp8)}};                   \
    return k;                                                                                              \
  }
NINFER_GEMV_QUANT_VARIANT(1)
NINFER_GEMV_QUANT_VARIANT(2)
NINFER_GEMV_QUANT_VARIANT(4)
NINFER_GEMV_QUANT_VARIANT(8)

} // namespace

int32_t register_linear_gemv_quant(const ninfer_registrar* r, char* err, size_t err_len) {
  static ninfer_variant storage[4];
  if (int32_t rc = GemvQuantVariant<1>::add(r, storage[0], err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = GemvQuantVariant<2>::add(r, storage[1], err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = GemvQuantVariant<4>::add(r, storage[2], err, err_len); rc != NINFER_OK) return rc;
  return GemvQuantVariant<8>::add(r, storage[3], err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
