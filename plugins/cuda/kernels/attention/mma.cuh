// Tensor-core building blocks of the prefill attention (attention/prefill_mma.cu): ldmatrix
// loads of 16-bit tiles in shared memory and the m16n8k16 MMA (bf16 or fp16 inputs) with
// float32 accumulation. Plain `mma.sync` PTX (sm_80 and later), no wgmma or TMA, so the same source
// compiles for sm_89, sm_90 and sm_120a.
//
// Fragment layouts of mma.m16n8k16 (g = lane / 4, c = lane % 4), as this code uses them:
//   A 16x16 (row-major)   a0 (g, 2c..2c+1)  a1 (g+8, 2c..)  a2 (g, 2c+8..)  a3 (g+8, 2c+8..)
//   B 16x8  (k x n)       b0 (k 2c..2c+1, n g)   b1 (k 2c+8.., n g)
//   C 16x8  float32       c0,c1 (g, 2c..2c+1)    c2,c3 (g+8, 2c..2c+1)
// so the C fragments of two adjacent 8-key score tiles are, packed to 16-bit pairs, exactly the A
// fragment of the next product (P . V) without passing through shared memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace ninfer::cuda_plugin::attention::mma {

// A shared-memory address as the 32-bit offset ldmatrix takes (fewer registers than a generic
// pointer, and constant offsets fold into the instruction).
__device__ __forceinline__ uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// Four 8x8 16-bit matrices from shared memory; lane l gives the address of row l % 8 of matrix
// l / 8 (16 contiguous bytes, 16-byte aligned). Volatile: it must stay between the barriers
// that publish and retire the tile.
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// The same, each matrix transposed (for B operands stored k-major, like V's key rows).
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// The two 16-bit input formats of the tensor-core prefill, as one interface: the element type,
// float -> element, two floats -> a packed pair (round to nearest even, `lo` in the low half,
// the lower index), the pair's halves back as floats, and d += a . b on one 16x8 tile with
// float32 accumulation. bf16 keeps float32's range with 8 significant bits; fp16 has 11 bits
// (8x finer rounding) but overflows past 65504 (docs/cuda-attention.md, "Precision").
struct Bf16Inputs {
  using T = __nv_bfloat16;
  static constexpr const char* kName = "bf16";
  __device__ static T from(float x) { return __float2bfloat16_rn(x); }
  __device__ static uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
  __device__ static float low(uint32_t v) { return __uint_as_float(v << 16); }
  __device__ static float high(uint32_t v) { return __uint_as_float(v & 0xffff0000u); }
  __device__ static void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

struct F16Inputs {
  using T = __half;
  static constexpr const char* kName = "fp16";
  __device__ static T from(float x) { return __float2half_rn(x); }
  __device__ static uint32_t pack(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
  __device__ static float low(uint32_t v) { return __half2float(__ushort_as_half(static_cast<unsigned short>(v & 0xffffu))); }
  __device__ static float high(uint32_t v) { return __half2float(__ushort_as_half(static_cast<unsigned short>(v >> 16))); }
  __device__ static void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

// Four floats as four elements at p (8-byte aligned).
template <class In>
__device__ __forceinline__ void store_x4(typename In::T* p, float4 x) {
  *reinterpret_cast<uint2*>(p) = make_uint2(In::pack(x.x, x.y), In::pack(x.z, x.w));
}

} // namespace ninfer::cuda_plugin::attention::mma
