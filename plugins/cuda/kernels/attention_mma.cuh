// Tensor-core building blocks of the bf16 prefill attention (attention_prefill_mma.cu):
// ldmatrix loads of bf16 tiles in shared memory and the m16n8k16 bf16 MMA with float32
// accumulation. Plain `mma.sync` PTX (sm_80 and later), no wgmma or TMA, so the same source
// compiles for sm_89, sm_90 and sm_120a.
//
// Fragment layouts of mma.m16n8k16 (g = lane / 4, c = lane % 4), as this code uses them:
//   A 16x16 (row-major)   a0 (g, 2c..2c+1)  a1 (g+8, 2c..)  a2 (g, 2c+8..)  a3 (g+8, 2c+8..)
//   B 16x8  (k x n)       b0 (k 2c..2c+1, n g)   b1 (k 2c+8.., n g)
//   C 16x8  float32       c0,c1 (g, 2c..2c+1)    c2,c3 (g+8, 2c..2c+1)
// so the C fragments of two adjacent 8-key score tiles are, packed to bf16 pairs, exactly the A
// fragment of the next product (P . V) without passing through shared memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace ninfer::cuda_plugin::attention::mma {

// A shared-memory address as the 32-bit offset ldmatrix takes (fewer registers than a generic
// pointer, and constant offsets fold into the instruction).
__device__ __forceinline__ uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// Four 8x8 bf16 matrices from shared memory; lane l gives the address of row l % 8 of matrix
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

// d += a . b on one 16x8 tile, bf16 inputs, float32 accumulation.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats as a bf16 pair (round to nearest even), `lo` in the low half (the lower index).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ __forceinline__ float bf16_lo(uint32_t v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t v) { return __uint_as_float(v & 0xffff0000u); }

// Four floats to bf16 at p (8-byte aligned).
__device__ __forceinline__ void store_bf16x4(__nv_bfloat16* p, float4 x) {
  *reinterpret_cast<uint2*>(p) = make_uint2(pack_bf16(x.x, x.y), pack_bf16(x.z, x.w));
}

} // namespace ninfer::cuda_plugin::attention::mma
