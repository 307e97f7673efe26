// What the quantized linear kernels share (linear/linear_gemv_quant.cu, the CUDA-core GEMVs, and
// linear/linear_gemv_quant_mma.cu, the tensor-core ones): their parameter block, built from the
// linear call and its weight description (ninfer/abi/ops/quant_weight.h), the code types, and
// exact conversions of scales and e4m3 codes.
#pragma once

#include <cuda_runtime.h>

#include "ninfer/abi/ops/linear.h"
#include "ninfer/abi/plugin_abi.h" // the dtype enum

namespace ninfer::cuda_plugin::quant {

typedef unsigned int u32;

enum Code { kInt4 = 0, kInt8 = 1, kFp8 = 2 };

// The kernels' parameter, passed by value: `wq` is host memory, read by the launch.
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
  int tiles; // codes in NINFER_QUANT_LAYOUT_TILES16 (quant_weight.h), else row-major
};

// Bytes of a row's 128-column piece in NINFER_QUANT_LAYOUT_TILES16.
__host__ __device__ constexpr int tile_piece_bytes(int code) { return code == kInt4 ? 64 : 128; }

// Where byte b of row n's row-major codes lies (quant_weight.h: either layout).
__device__ __forceinline__ long long code_byte(const Args& a, long long n, long long b, int piece) {
  if (!a.tiles) return n * a.row_bytes + b;
  return (n >> 4) * 16LL * a.row_bytes + b / piece * 16LL * piece + (n & 15) * piece + b % piece;
}

#ifndef __CUDACC_RTC__
// The parameter block of a linear call on quantized weights (checked by the caller).
inline Args make_args(const ninfer_linear_args& a) {
  const int32_t K = a.in_features;
  return Args{a.x,
              a.x_row_stride,
              static_cast<const unsigned char*>(a.w),
              a.y,
              a.y_row_stride,
              a.wq->scales,
              a.wq->zeros,
              a.wq->g_idx,
              K,
              a.out_features,
              a.w_dtype == NINFER_DTYPE_INT4 ? (K + 1) / 2 : K,
              (K + a.wq->group_size - 1) / a.wq->group_size,
              a.wq->group_size,
              a.wq->scale_dtype,
              a.accumulate,
              a.wq->layout == NINFER_QUANT_LAYOUT_TILES16 ? 1 : 0};
}

// Index of a code type's kernel in a variant's {int4, int8, fp8} list.
inline int code_index(int32_t w_dtype) {
  return w_dtype == NINFER_DTYPE_INT4 ? kInt4 : w_dtype == NINFER_DTYPE_INT8 ? kInt8 : kFp8;
}
#endif

__device__ __forceinline__ float f16_to_float(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

// Scale i (row-major [N, G]) as float32, exactly, from F32, BF16 or F16.
__device__ __forceinline__ float load_scale(const Args& a, long long i) {
  if (a.scale_dtype == NINFER_DTYPE_F32) return __ldg(static_cast<const float*>(a.scales) + i);
  const unsigned short h = __ldg(static_cast<const unsigned short*>(a.scales) + i);
  return a.scale_dtype == NINFER_DTYPE_BF16 ? __uint_as_float(static_cast<u32>(h) << 16) : f16_to_float(h);
}

// 2^23 + v for an integer code v < 2^23: its float32 bits are 0x4B000000 | v, so decoding is a
// bit operation, and (2^23 + u) - (2^23 + zero) = u - zero exactly.
constexpr float kMagic = 8388608.f;

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

// The e4m3fn bytes of a word as two f16 pairs, exactly (every e4m3 value is an f16): bytes 0, 1
// into lo and 2, 3 into hi, the lower byte in the lower half. sm_89 on: one conversion
// instruction per pair. Before: each byte's sign to bit 15 and its exponent and mantissa under
// f16's, which reads 2^-8 of the value (exponent bias 15 against 7; subnormals alike), then one
// f16x2 multiply by 2^8, exact. NaN bytes (0x7f, 0xff) read as +-480 there.
__device__ __forceinline__ void e4m3x4_to_f16x2(u32 w, u32& lo, u32& hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm("{\n .reg .b16 a, b;\n mov.b32 {a, b}, %2;\n cvt.rn.f16x2.e4m3x2 %0, a;\n cvt.rn.f16x2.e4m3x2 %1, b;\n}"
      : "=r"(lo), "=r"(hi)
      : "r"(w));
#else
  const auto pair = [](u32 v) { // bytes at bits 0..7 and 8..15
    const u32 bits = ((v & 0x7fu) << 7) | ((v & 0x80u) << 8) | ((v & 0x7f00u) << 15) | ((v & 0x8000u) << 16);
    u32 d;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(bits), "r"(0x5c005c00u)); // 2^8 in both halves
    return d;
  };
  lo = pair(w & 0xffffu);
  hi = pair(w >> 16);
#endif
}

} // namespace ninfer::cuda_plugin::quant
