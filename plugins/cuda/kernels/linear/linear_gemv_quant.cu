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
#include "linear/quant_common.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include "linear/quant_variant.hpp"
#endif

namespace ninfer::cuda_plugin::gemv_quant {

using namespace quant;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

template <int CODE>
struct CodeTraits {
  static constexpr int per_word = CODE == kInt4 ? 8 : 4; // codes per 32-bit word
  static constexpr float symmetric_zero = CODE == kInt4 ? 8.f : CODE == kInt8 ? 128.f : 0.f;
};

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
      ninfer_linear_gemv_quant_warp_t##TOKENS##_##CODE_NAME(ninfer::cuda_plugin::quant::Args a,            \
                                                            long long b, long long e) {                    \
    ninfer::cuda_plugin::grid_dependency_prologue();                                                       \
    ninfer::cuda_plugin::gemv_quant::gemv<ninfer::cuda_plugin::quant::CODE, TOKENS>(a, b, e);              \
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

// One variant per token tile (1, 2, 3-4, 5 and more: the planner's own route prefers the variant
// of most tokens per CTA, which must not do 8 tokens' arithmetic for one); rows of whole 4-byte
// words (int4: K % 8 == 0; int8, fp8: K % 4 == 0), int32 sizes; any grouping, g_idx included.
template <int TOKENS>
struct GemvQuantDef {
  static const char* const name;
  static constexpr int threads = gemv_quant::kThreads;
  static constexpr int tokens_per_cta = TOKENS;
  static const QuantKernel* kernels();
  static int32_t supports(const void*, const ninfer_shape* s) {
    const int64_t min_tokens = TOKENS == 1 ? 1 : TOKENS / 2 + 1;
    if (s->tokens < min_tokens || (TOKENS < 8 && s->tokens > TOKENS)) return 0;
    const int64_t K = s->dims[0], N = s->dims[1];
    if (K < 1 || N < 1 || K > INT32_MAX || N > INT32_MAX) return 0;
    return K % (s->dtype == NINFER_DTYPE_INT4 ? 8 : 4) == 0;
  }
  static const char* invalid(const ninfer_linear_args& a) {
    if (a.in_features % (a.w_dtype == NINFER_DTYPE_INT4 ? 8 : 4) != 0)
      return "rows must be whole 4-byte words (in_features % 8 for int4, % 4 for int8 and fp8)";
    if (reinterpret_cast<uintptr_t>(a.w) % 4 != 0) return "w must be 4-byte aligned";
    return nullptr;
  }
  // grid.x: blocks of rows (from the shape alone); grid.y: the planner's token tiles.
  static dim3 grid(const ninfer_linear_args& a, const ninfer_launch& l) {
    return linear_grid(a.out_features, gemv_quant::kRowsPerCta<TOKENS>, l.grid_x);
  }
};

#define NINFER_GEMV_QUANT_VARIANT(TOKENS)                                                                  \
  template <>                                                                                              \
  const char* const GemvQuantDef<TOKENS>::name = "gemv_quant_warp_t" #TOKENS;                              \
  template <>                                                                                              \
  const QuantKernel* GemvQuantDef<TOKENS>::kernels() {                                                     \
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
  if (int32_t rc = QuantLinearVariant<GemvQuantDef<1>>::add(r, storage[0], err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = QuantLinearVariant<GemvQuantDef<2>>::add(r, storage[1], err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = QuantLinearVariant<GemvQuantDef<4>>::add(r, storage[2], err, err_len); rc != NINFER_OK) return rc;
  return QuantLinearVariant<GemvQuantDef<8>>::add(r, storage[3], err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
