// kv_append: write the new K and V rows of a batch's tokens into their slots of the KV cache
// (contract: ninfer/abi/ops/kv_append.h). The cache is float32, float16 or bfloat16; the float32
// rows are rounded to nearest even on the way in (one kernel per cache dtype, one variant
// `rows`). The compact formats (KV_INT8, KV_FP8, KV_INT4R) are the variant `rows_quantized`:
// one warp per head row, the row in registers, its group maxima and the least-error scale
// search's sums (KV_FP8, KV_INT4R) by warp shuffles.
//
// One CTA per token (grid-stride over the launch's tokens) copies the token's kv_heads x
// head_dim K row and V row. A slot or position outside the cache cannot be reported from the
// device; such a token is skipped rather than written out of bounds. Callers validate the
// batch first, as the contract asks.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "common/grid_dependency.cuh"
#include "attention/shapes.hpp"
#include "pointwise/kv_cache_write.cuh"
#include "ninfer/abi/ops/kv_append.h"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include "../../cuda_variant.hpp"
#include "pointwise/families.hpp"
#include "common/token_variant.cuh"
#endif

namespace ninfer::cuda_plugin {
namespace {

constexpr int kThreads = 256;

template <class E>
__device__ void append_rows(const ninfer_kv_append_args& a, int64_t begin, int64_t end) {
  const ninfer_kv_cache& c = a.cache;
  const int64_t row = static_cast<int64_t>(c.kv_heads) * c.head_dim;
  E* const ck = static_cast<E*>(c.k);
  E* const cv = static_cast<E*>(c.v);
  for (int64_t t = begin + blockIdx.x; t < end; t += gridDim.x) {
    const int64_t at = kv_token_row(c, a.batch, t);
    if (at < 0) continue;
    const float* k = a.k + t * a.k_token_stride;
    const float* v = a.v + t * a.v_token_stride;
    for (int64_t i = threadIdx.x; i < row; i += kThreads) {
      to_cache(k[i], ck[at + i]);
      to_cache(v[i], cv[at + i]);
    }
  }
}

// ---- Compact formats: one warp quantizes one head row (kv_append.h). ----

constexpr int kMaxHeadDim = 512;            // the row lives in registers, kMaxHeadDim / 32 per lane
constexpr int kPerLane = kMaxHeadDim / 32;
constexpr unsigned kAllLanes = 0xffffffffu;

__device__ __forceinline__ float warp_max_f(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(kAllLanes, v, off));
  return v;
}

__device__ __forceinline__ uint16_t half_bits(float x) { return __half_as_ushort(__float2half_rn(x)); }

__device__ __forceinline__ bool finite_f(float x) { return fabsf(x) < __int_as_float(0x7f800000); }

// The e4m3fn code of x rounded to nearest even, saturated to +-448 (the CPU reference's rule,
// plugins/cpu/common/kv_formats.hpp, from the float's bits so that NVRTC needs no fp8 header).
__device__ __forceinline__ uint8_t e4m3_satfinite(float x) {
  if (x != x) return 0x7f;
  const uint8_t sign = (__float_as_uint(x) >> 31) ? 0x80 : 0;
  const float a = fabsf(x);
  if (a >= 448.f) return sign | 0x7e;
  // The leading bit's exponent, never below -6 (e4m3's subnormals keep the quantum 2^-9).
  int lead = max(static_cast<int>((__float_as_uint(a) >> 23) & 0xff) - 127, -6);
  const float quantum = __int_as_float((lead - 3 + 127) << 23);
  int n = __float2int_rn(a / quantum); // quanta, in [0, 16]; exact division by a power of two
  if (n < 8) return sign | static_cast<uint8_t>(n); // subnormal (lead -6) or zero
  if (n == 16) { // rounded up to the next binade
    ++lead;
    n = 8;
  }
  return sign | static_cast<uint8_t>(((lead + 7) << 3) | (n - 8));
}

// The value of an e4m3fn code (never the NaN 0x7f, which satfinite does not produce).
__device__ __forceinline__ float e4m3_value(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  const float mag = e == 0 ? static_cast<float>(m) * __int_as_float((127 - 9) << 23)
                           : static_cast<float>(8 + m) * __int_as_float((e - 10 + 127) << 23);
  return (b & 0x80) ? -mag : mag;
}

// kv_append.h's least-error sums, rounded as the contract says (no fused multiply-add): an
// element's float32 error squared exactly in double into its lane's partial, then the xor
// butterfly, after which every lane holds the sum (so the pick is warp-uniform).
__device__ __forceinline__ double add_error(double partial, float decoded, float y) {
  const double e = static_cast<double>(__fsub_rn(decoded, y));
  return __dadd_rn(partial, __dmul_rn(e, e));
}
__device__ __forceinline__ double warp_error_sum(double p) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) p = __dadd_rn(p, __shfl_xor_sync(kAllLanes, p, off));
  return p;
}

// Lane `lane` holds elements d = lane + 32 i (i < n = head_dim / 32) of the row in y[i].
// Integer groups of 64: group g is i = 2g, 2g + 1 of every lane, so lane l's partial of group g
// takes elements 64g + l and 64g + 32 + l, in that order, as the contract's sum does.
__device__ __forceinline__ int int4_code(float y, float s) {
  return s > 0.f ? min(max(__float2int_rn(y / s), -8), 7) : 0;
}

// KV_INT8 (scale absmax / 127, codes [-127, 127]) or KV_INT4R (the least-error scale of
// NINFER_KV_INT4_SCALE_CANDIDATES, codes [-8, 7]); put(i, q) stores the code of y[i].
template <bool INT4, class Put>
__device__ void quantize_groups(const float (&y)[kPerLane], int n, int lane, uint16_t* scales, Put put) {
#pragma unroll
  for (int g = 0; g < kPerLane / 2; ++g) { // unrolled: y's indices stay compile-time (registers)
    if (2 * g >= n) break;                 // warp-uniform
    const float y0 = y[2 * g], y1 = y[2 * g + 1];
    const bool finite = __all_sync(kAllLanes, finite_f(y0) && finite_f(y1));
    const float a = warp_max_f(fmaxf(fabsf(y0), fabsf(y1)));
    float s = __half2float(__float2half_rn(a / (INT4 ? 7.f : 127.f)));
    const bool ok = finite && finite_f(s);
    if (INT4 && ok && s > 0.f) {
      double best = __longlong_as_double(0x7ff0000000000000ll); // +inf
      for (int i = 0; i < NINFER_KV_INT4_SCALE_CANDIDATES; ++i) {
        const float c = __half2float(__float2half_rn(a / (7.f + 0.25f * static_cast<float>(i))));
        double p = add_error(0.0, __fmul_rn(static_cast<float>(int4_code(y0, c)), c), y0);
        p = warp_error_sum(add_error(p, __fmul_rn(static_cast<float>(int4_code(y1, c)), c), y1));
        if (p < best) {
          best = p;
          s = c;
        }
      }
    }
    if (lane == 0) scales[g] = ok ? half_bits(s) : static_cast<uint16_t>(0x7e00);
    if (INT4) {
      put(2 * g, ok ? int4_code(y0, s) : 0);
      put(2 * g + 1, ok ? int4_code(y1, s) : 0);
    } else {
      put(2 * g, ok && s > 0.f ? min(max(__float2int_rn(y0 / s), -127), 127) : 0);
      put(2 * g + 1, ok && s > 0.f ? min(max(__float2int_rn(y1 / s), -127), 127) : 0);
    }
  }
}

// KV_FP8's row scale: the least-error candidate absmax / (448 - 14 i) (kv_append.h).
__device__ float fp8_row_scale(const float (&y)[kPerLane], int n, float a) {
  float s = 0.f;
  double best = __longlong_as_double(0x7ff0000000000000ll);
  for (int i = 0; i < NINFER_KV_FP8_SCALE_CANDIDATES; ++i) {
    const float c = a / (448.f - 14.f * static_cast<float>(i));
    double p = 0.0;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j)
      if (j < n) p = add_error(p, __fmul_rn(e4m3_value(e4m3_satfinite(y[j] / c)), c), y[j]);
    p = warp_error_sum(p);
    if (p < best) {
      best = p;
      s = c;
    }
  }
  return s;
}

// y <- H y over the warp's row (kv_append.h's normalized Hadamard matrix): the butterflies of
// the CPU reference's fast transform in the same order, pairs across lanes by shuffles (len <
// 32) or across a lane's own elements, so the result is the reference's bit for bit.
__device__ void hadamard_rotate(float (&y)[kPerLane], int n, int lane) {
  for (int len = 1; len < 32; len <<= 1) {
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const float other = __shfl_xor_sync(kAllLanes, y[i], len);
      if (i < n) y[i] = (lane & len) ? other - y[i] : y[i] + other;
    }
  }
#pragma unroll
  for (int len = 1; len < kPerLane; len <<= 1) { // strides of 32 * len elements
    if (len >= n) break;                          // warp-uniform
#pragma unroll
    for (int i = 0; i + len < kPerLane; ++i)
      if (i < n && !(i & len)) {
        const float a = y[i], b = y[i + len];
        y[i] = a + b;
        y[i + len] = a - b;
      }
  }
  const float f = static_cast<float>(1.0 / sqrt(static_cast<double>(32 * n)));
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) y[i] *= f;
}

template <int32_t DTYPE>
__device__ void quantize_row(const float* x, bool key, int hd, void* codes, void* scales, int64_t row, int lane) {
  const int n = hd / 32;
  float y[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) y[i] = i < n ? x[lane + 32 * i] : 0.f;
  if constexpr (DTYPE == NINFER_DTYPE_KV_INT8) {
    int8_t* c = static_cast<int8_t*>(codes) + row * hd;
    quantize_groups<false>(y, n, lane, static_cast<uint16_t*>(scales) + row * (hd / NINFER_KV_GROUP),
                           [&](int i, int q) { c[lane + 32 * i] = static_cast<int8_t>(q); });
  } else if constexpr (DTYPE == NINFER_DTYPE_KV_FP8) {
    bool finite = true;
    float a = 0.f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
      if (i < n) {
        finite = finite && finite_f(y[i]);
        a = fmaxf(a, fabsf(y[i]));
      }
    finite = __all_sync(kAllLanes, finite);
    a = warp_max_f(a);
    const float s = finite && a > 0.f ? fp8_row_scale(y, n, a) : 0.f;
    if (lane == 0) static_cast<float*>(scales)[row] = finite ? s : __int_as_float(0x7fc00000);
    uint8_t* c = static_cast<uint8_t*>(codes) + row * hd;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i)
      if (i < n) c[lane + 32 * i] = finite && s > 0.f ? e4m3_satfinite(y[i] / s) : 0;
  } else { // KV_INT4R: two codes per byte, the even element's in the low nibble
    if (key) hadamard_rotate(y, n, lane);
    uint8_t* c = static_cast<uint8_t*>(codes) + row * hd / 2;
    quantize_groups<true>(y, n, lane, static_cast<uint16_t*>(scales) + row * (hd / NINFER_KV_GROUP), [&](int i, int q) {
      const int nib = q + 8, odd = __shfl_down_sync(kAllLanes, nib, 1);
      if (!(lane & 1)) c[(lane + 32 * i) / 2] = static_cast<uint8_t>(nib | (odd << 4));
    });
  }
}

// One CTA per token: its warps share out the token's kv_heads K rows and kv_heads V rows.
template <int32_t DTYPE>
__device__ void append_quantized(const ninfer_kv_append_args& a, int64_t begin, int64_t end) {
  const ninfer_kv_cache& c = a.cache;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int64_t t = begin + blockIdx.x; t < end; t += gridDim.x) {
    const int64_t at = kv_token_row(c, a.batch, t);
    if (at < 0) continue;
    const int64_t row0 = at / c.head_dim; // the head row index of kv head 0
    for (int r = warp; r < 2 * c.kv_heads; r += kThreads / 32) {
      const bool key = r < c.kv_heads;
      const int h = key ? r : r - c.kv_heads;
      const float* x = key ? a.k + t * a.k_token_stride : a.v + t * a.v_token_stride;
      quantize_row<DTYPE>(x + static_cast<int64_t>(h) * c.head_dim, key, c.head_dim, key ? c.k : c.v,
                          key ? c.k_scale : c.v_scale, row0 + h, lane);
    }
  }
}

} // namespace
} // namespace ninfer::cuda_plugin

// One kernel per cache dtype: `ROWS` is the append_* instantiation that writes its rows.
#define NINFER_KV_APPEND(NAME, ROWS)                                                                         \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kThreads)                                \
      ninfer_kv_append_##NAME(ninfer_kv_append_args a, int64_t b, int64_t e) {                               \
    ninfer::cuda_plugin::grid_dependency_prologue();                                                         \
    ninfer::cuda_plugin::ROWS(a, b, e);                                                                      \
  }
NINFER_KV_APPEND(int8, append_quantized<NINFER_DTYPE_KV_INT8>)
NINFER_KV_APPEND(fp8, append_quantized<NINFER_DTYPE_KV_FP8>)
NINFER_KV_APPEND(int4r, append_quantized<NINFER_DTYPE_KV_INT4R>)
NINFER_KV_APPEND(f32, append_rows<float>)
NINFER_KV_APPEND(f16, append_rows<__half>)
NINFER_KV_APPEND(bf16, append_rows<__nv_bfloat16>)

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

// One variant for every cache dtype: the pair's f32 / bf16 kernels by the cache dtype (dtype()),
// the f16 one through kernel().
struct KvAppendDef : TokenDefDefaults {
  using Args = ninfer_kv_append_args;
  static constexpr const char* op = NINFER_OP_KV_APPEND;
  static constexpr const char* name = "rows";
  static constexpr int threads = kThreads;
  static constexpr uint32_t dtype_mask = attention::kKvDtypeMask;
  static KernelPair kernels() {
    return {"ninfer_kv_append_f32", reinterpret_cast<const void*>(ninfer_kv_append_f32), "ninfer_kv_append_bf16",
            reinterpret_cast<const void*>(ninfer_kv_append_bf16)};
  }
  static int32_t supports(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0; }
  static int32_t dtype(const Args& a) { return a.cache.dtype; }
  static TokenKernel kernel(const Args& a) {
    return a.cache.dtype == NINFER_DTYPE_F16 ? reinterpret_cast<const void*>(ninfer_kv_append_f16) : nullptr;
  }
  static const char* invalid(const Args& a, const ninfer_launch&) {
    if (attention::kv_dtype_index(a.cache.dtype) < 0) return "the KV cache must be float32, float16 or bfloat16";
    return ninfer_kv_cache_layout_error(&a.cache);
  }
};

constexpr uint32_t kCompactMask =
    (1u << NINFER_DTYPE_KV_INT8) | (1u << NINFER_DTYPE_KV_FP8) | (1u << NINFER_DTYPE_KV_INT4R);

// The compact formats: the int8 kernel's resources stand for the three (the same shape of work;
// int4r's rotation adds registers only within the row's kPerLane).
struct KvAppendQuantizedDef : TokenDefDefaults {
  using Args = ninfer_kv_append_args;
  static constexpr const char* op = NINFER_OP_KV_APPEND;
  static constexpr const char* name = "rows_quantized";
  static constexpr int threads = kThreads;
  static constexpr uint32_t dtype_mask = kCompactMask;
  static KernelPair kernels() {
    return {"ninfer_kv_append_int4r", reinterpret_cast<const void*>(ninfer_kv_append_int4r), nullptr, nullptr};
  }
  static int32_t supports(const void*, const ninfer_shape* s) {
    return s->tokens > 0 && s->dims[1] > 0 && s->dims[0] % 32 == 0 && s->dims[0] <= kMaxHeadDim &&
           ninfer_kv_dtype_takes_head_dim(s->dtype, s->dims[0]);
  }
  static int32_t dtype(const Args&) { return NINFER_DTYPE_F32; }
  static TokenKernel kernel(const Args& a) {
    switch (a.cache.dtype) {
      case NINFER_DTYPE_KV_INT8: return reinterpret_cast<const void*>(ninfer_kv_append_int8);
      case NINFER_DTYPE_KV_FP8: return reinterpret_cast<const void*>(ninfer_kv_append_fp8);
      default: return nullptr; // KV_INT4R: the pair's kernel
    }
  }
  static const char* invalid(const Args& a, const ninfer_launch&) {
    if (!(kCompactMask & (1u << a.cache.dtype))) return "the KV cache must be kv_int8, kv_fp8 or kv_int4r";
    if (!ninfer_kv_dtype_takes_head_dim(a.cache.dtype, a.cache.head_dim) || a.cache.head_dim % 32 ||
        a.cache.head_dim > kMaxHeadDim)
      return "head_dim is not one the cache's format takes (kv_append.h)";
    if (!a.cache.k_scale || !a.cache.v_scale) return "a compact KV cache needs k_scale and v_scale";
    return nullptr;
  }
};

} // namespace

int32_t register_kv_append(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<KvAppendDef, KvAppendQuantizedDef>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
