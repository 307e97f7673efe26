// The pieces the tensor-core GEMVs on quantized weights share (linear/linear_gemv_quant_mma.cu,
// linear/gemv_lean.cuh): the bf16 and f16 MMAs on register arrays, the int4 decode into bf16
// pairs, and a 16-byte shared-memory load at a shared-space address.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "linear/quant_common.cuh"

namespace ninfer::cuda_plugin::quant {

// d += A . B (m16n8k16, bf16 in, float32 accumulate); mma_first: d = A . B.
__device__ __forceinline__ void mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_first(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %10, %10, %10};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.f));
}

// The same with f16 inputs (gemv_fp8_lean: e4m3 codes convert to f16 in one instruction).
__device__ __forceinline__ void mma_f16(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_f16_first(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %10, %10, %10};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.f));
}

__device__ __forceinline__ u32 bf16x2_sub(u32 a, u32 b) {
  const __nv_bfloat162 d = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&a), *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<const u32*>(&d);
}

// (a & b) | c in one instruction (the compiler splits it when b and c are both constants).
__device__ __forceinline__ u32 and_or(u32 a, u32 b, u32 c) {
  u32 d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// 16 bytes of shared memory at a shared-space address.
__device__ __forceinline__ uint4 lds16(u32 addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr) : "memory");
  return v;
}

// Nibbles i and i + 4 of w as the bf16 pair (u_i - zero, u_{i+4} - zero); bias = 128 + zero in
// both halves. 0x4300 is bf16 128.0, whose last mantissa bit weighs 1: OR-ing a nibble in adds it,
// and 128 + u - (128 + zero) is exact, so the pair is the integer u - zero.
__device__ __forceinline__ u32 int4_pair(u32 w, int i, u32 bias) {
  return bf16x2_sub(and_or(w >> (4 * i), 0x000F000Fu, 0x43004300u), bias);
}

} // namespace ninfer::cuda_plugin::quant
