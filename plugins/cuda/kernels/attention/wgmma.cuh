// Warpgroup MMA (wgmma, sm_90a only) for the Hopper prefill attention (attention/prefill_wgmma.cuh):
// the shared-memory matrix descriptor, the fences and groups, and the two products that kernel
// issues, m64n32k16 with both operands in shared memory (S = Q K^T) and m64n{128,256}k16 with A
// in registers (P V). Everything here compiles only where __CUDA_ARCH_FEAT_SM90_ALL is defined (the
// cuda-sm90 plugin, built for sm_90a); elsewhere the header declares nothing.
//
// Operand layout in shared memory: no swizzle. A tile of R rows x HD 16-bit elements is stored as
// 8 x 8 "core matrices" (8 rows of 16 bytes, 128 contiguous bytes), core matrix (row / 8, col / 8)
// at byte (row / 8 * HD / 8 + col / 8) * 128 (core_offset). Read row-major it is the K-major
// operand (rows = M or N, cols = K): leading byte offset (next 8 columns) 128, stride byte offset
// (next 8 rows) 16 * HD. Read as a K x N matrix with rows = K (V's keys) it is the MN-major
// operand: the 8 elements along N are contiguous, leading byte offset (next 8 rows of K) 16 * HD,
// stride byte offset (next 8 columns of N) 128 (PTX ISA, "canonical layouts", no swizzling).
//
// Accumulator fragments: warp w of the warpgroup holds rows 16 w .. 16 w + 15 in the layout of
// mma.m16n8 per 8 columns (d[n][0..1]: row g, cols 8n + 2c, +1; d[n][2..3]: row g + 8), and the
// A fragment in registers is mma.m16n8k16's, so two adjacent 8-key score tiles packed to 16-bit
// pairs are the A operand of P V, as in attention/mma_tile.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "attention/mma.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
namespace ninfer::cuda_plugin::attention::wgmma {

// Byte offset of element (row, col) of an R x HD core-matrix tile.
template <int HD>
__device__ __forceinline__ uint32_t core_offset(int row, int col) {
  return static_cast<uint32_t>(((row >> 3) * (HD / 8) + (col >> 3)) * 128 + (row & 7) * 16 + (col & 7) * 2);
}

// Row and first column of the 16-byte chunk at byte 16 i of such a tile: consecutive chunks walk
// the 8 rows of one core matrix, then the core matrices along a row group, then the row groups.
template <int HD>
__device__ __forceinline__ int2 core_chunk(int i) {
  return make_int2((i / HD) * 8 + (i & 7), ((i >> 3) % (HD / 8)) * 8);
}

// The 64-bit descriptor of a matrix at shared-space address `addr` (16-byte aligned), no swizzle.
__device__ __forceinline__ uint64_t desc(uint32_t addr, uint32_t leading, uint32_t stride) {
  return static_cast<uint64_t>((addr & 0x3FFFFu) >> 4) | (static_cast<uint64_t>(leading >> 4) << 16) |
         (static_cast<uint64_t>(stride >> 4) << 32);
}

// Before a wgmma whose accumulator or A registers other instructions wrote.
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Until at most N of the warpgroup's committed groups are pending.
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Generic-proxy writes to shared memory (stores, cp.async) made visible to wgmma's reads (the
// async proxy); each writing thread fences, then the CTA barrier.
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Pins accumulator registers at this point of the program: the compiler sees a wgmma's results
// as written when it is issued, so without this it may move their reads above the wait.
template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N][4]) {
#pragma unroll
  for (int n = 0; n < N; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[n][e])::"memory");
}

#define NINFER_WG_F4(d, n) "+f"(d[n][0]), "+f"(d[n][1]), "+f"(d[n][2]), "+f"(d[n][3])
#define NINFER_WG_F16(d, n) NINFER_WG_F4(d, n), NINFER_WG_F4(d, n + 1), NINFER_WG_F4(d, n + 2), NINFER_WG_F4(d, n + 3)
#define NINFER_WG_F64(d, n) NINFER_WG_F16(d, n), NINFER_WG_F16(d, n + 4), NINFER_WG_F16(d, n + 8), NINFER_WG_F16(d, n + 12)

// d (64 x 32, float32) = (accumulate ? d : 0) + A (64 x 16) . B (16 x 32), A and B K-major in
// shared memory. TYPE: f16 or bf16.
#define NINFER_WGMMA_SS_N32(TYPE)                                                                            \
  __device__ __forceinline__ void ss_n32_##TYPE(float (&d)[4][4], uint64_t a, uint64_t b, int accumulate) {  \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                                \
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32." #TYPE "." #TYPE " "                            \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "                  \
                 "%16, %17, p, 1, 1, 0, 0;\n}\n"                                                             \
                 : NINFER_WG_F16(d, 0)                                                                       \
                 : "l"(a), "l"(b), "r"(accumulate));                                                         \
  }
NINFER_WGMMA_SS_N32(f16)
NINFER_WGMMA_SS_N32(bf16)

// d (64 x 256, float32) += A (64 x 16, this thread's fragment in registers) . B (16 x 256),
// B MN-major in shared memory (transposed read, imm-trans-b = 1).
#define NINFER_WGMMA_RS_N256(TYPE)                                                                           \
  __device__ __forceinline__ void rs_n256_##TYPE(float (&d)[32][4], const uint32_t (&a)[4], uint64_t b) {    \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                                  \
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32." #TYPE "." #TYPE " {"                          \
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                    \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "          \
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "          \
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "          \
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "          \
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "          \
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, "    \
                 "%111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, " \
                 "%126, %127}, {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"                             \
                 : NINFER_WG_F64(d, 0), NINFER_WG_F64(d, 16)                                                 \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));                                      \
  }
NINFER_WGMMA_RS_N256(f16)
NINFER_WGMMA_RS_N256(bf16)

// The same with N = 128 (head dims of the hd128 class).
#define NINFER_WGMMA_RS_N128(TYPE)                                                                           \
  __device__ __forceinline__ void rs_n128_##TYPE(float (&d)[16][4], const uint32_t (&a)[4], uint64_t b) {    \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                                  \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." #TYPE "." #TYPE " {"                          \
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                    \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "          \
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "          \
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "         \
                 "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"                                              \
                 : NINFER_WG_F64(d, 0)                                                                       \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));                                      \
  }
NINFER_WGMMA_RS_N128(f16)
NINFER_WGMMA_RS_N128(bf16)

#undef NINFER_WGMMA_RS_N128
#undef NINFER_WGMMA_RS_N256
#undef NINFER_WGMMA_SS_N32
#undef NINFER_WG_F64
#undef NINFER_WG_F16
#undef NINFER_WG_F4

// The two products in the input format of the tensor-core prefill (mma::F16Inputs, Bf16Inputs).
template <class In>
struct Ops;
template <>
struct Ops<mma::F16Inputs> {
  __device__ static void s(float (&d)[4][4], uint64_t a, uint64_t b, int acc) { ss_n32_f16(d, a, b, acc); }
  __device__ static void pv(float (&d)[32][4], const uint32_t (&a)[4], uint64_t b) { rs_n256_f16(d, a, b); }
  __device__ static void pv(float (&d)[16][4], const uint32_t (&a)[4], uint64_t b) { rs_n128_f16(d, a, b); }
};
template <>
struct Ops<mma::Bf16Inputs> {
  __device__ static void s(float (&d)[4][4], uint64_t a, uint64_t b, int acc) { ss_n32_bf16(d, a, b, acc); }
  __device__ static void pv(float (&d)[32][4], const uint32_t (&a)[4], uint64_t b) { rs_n256_bf16(d, a, b); }
  __device__ static void pv(float (&d)[16][4], const uint32_t (&a)[4], uint64_t b) { rs_n128_bf16(d, a, b); }
};

} // namespace ninfer::cuda_plugin::attention::wgmma
#endif // __CUDA_ARCH_FEAT_SM90_ALL
