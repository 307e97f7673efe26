// linear for one or two tokens on the CUDA cores (contract: ninfer/abi/ops/linear.h): the
// run-time compiled GEMV family's kernel (linear/gemv_warp_template.cuh), prebuilt with the
// parameters that won `ninfer-tune --jit-sweep` on the H200, so decode gets it without NVRTC.
//   gemv_warp_t1  = jit_gemv_t128_r2_v8_m1: 128 threads, 2 weight rows per warp, 8 weights per
//               16-byte load, one token per CTA. H200, Qwen3-8B matrices at T = 1: 389.9 us
//               against 456.4 us for the tensor-core gemv_mma_t1; one-token forward pass 6,120 ->
//               5,963 us (docs/performance.md "ninfer-tune --jit-sweep").
//   gemv_warp_t2  = jit_gemv_t128_r2_v8_m2: the same shape with two tokens per CTA (W streamed once
//               for both). Not measured yet; registered so ninfer-tune and linear_bench time it.
// With one activation row the tensor-core GEMV's x hi/lo split and fragment shuffles cost more
// than the MMAs save; a plain float32 FMA per weight is enough to stream W at the copy rate.
//
// The source is included, not copied: one kernel for both builds. The entry points below add
// what a prebuilt kernel needs and NVRTC's copy must not have: grid_dependency_prologue() first
// (NVRTC has no plugin headers, and the JIT launches through the driver without programmatic
// serialization, which is safe without it), and the plugin's (ninfer_linear_args, begin, end)
// signature, so the variant launches through TokenVariant / launch_kernel like every other.
//
// Every shape of the contract runs: float32 or bf16 weights, any in_features, any x row stride.
// Rows that are not vector-aligned (in_features % 8 != 0, an x stride that is not a multiple of
// 4 floats, misaligned pointers) take the template's scalar path: correct, but slow.
#include <cuda_runtime.h>

#include <cstdint>

#include "common/grid_dependency.cuh"
#include "ninfer/abi/ops/linear.h"
// Plain CUDA C++ in namespace ninfer_jit, no includes of its own (it is NVRTC's input as is).
#include "linear/gemv_warp_template.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include "../../cuda_variant.hpp"
#include "linear/variants.hpp"
#include "common/token_variant.cuh"
#endif

namespace ninfer::cuda_plugin {
namespace {

// The --jit-sweep winner's parameters (the family's t, r and v).
constexpr int kCcThreads = 128;
constexpr int kCcRowsPerWarp = 2;
constexpr int kCcVec = 8;
constexpr int kCcRowsPerCta = kCcThreads / 32 * kCcRowsPerWarp;

template <class W, int TOKENS>
__device__ __forceinline__ void gemv_warp(const ninfer_linear_args& a, int64_t begin, int64_t end) {
  ninfer_jit::gemv<W, kCcThreads, kCcRowsPerWarp, kCcVec, TOKENS>(a.x, a.x_row_stride, a.w, a.y, a.y_row_stride,
                                                                   a.in_features, a.out_features, begin, end,
                                                                   a.accumulate);
}

// Requested before the prologue's wait (ninfer_jit::prefetch_rows): the first 4 KB of each
// row. With up to 8 resident CTAs of 8 rows per SM that is at most ~35 MB on the H200, inside
// its L2, and about what the copy rate moves during a 4-8 us norm or attention kernel.
constexpr int kPrefetchBytes = 4096;

template <class W>
__device__ __forceinline__ void prefetch_weights(const ninfer_linear_args& a) {
  if (blockIdx.y == 0)
    ninfer_jit::prefetch_rows<W, kCcThreads, kCcRowsPerWarp>(a.w, a.in_features, a.out_features, kPrefetchBytes);
}

} // namespace
} // namespace ninfer::cuda_plugin

#define NINFER_GEMV_CC(TOKENS)                                                                            \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kCcThreads)                          \
      ninfer_linear_gemv_warp_t##TOKENS##_f32(ninfer_linear_args a, int64_t b, int64_t e) {                   \
    ninfer::cuda_plugin::prefetch_weights<ninfer_jit::F32>(a);                                            \
    ninfer::cuda_plugin::grid_dependency_prologue();                                                      \
    ninfer::cuda_plugin::gemv_warp<ninfer_jit::F32, TOKENS>(a, b, e);                                       \
  }                                                                                                       \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kCcThreads)                          \
      ninfer_linear_gemv_warp_t##TOKENS##_bf16(ninfer_linear_args a, int64_t b, int64_t e) {                  \
    ninfer::cuda_plugin::prefetch_weights<ninfer_jit::Bf16>(a);                                           \
    ninfer::cuda_plugin::grid_dependency_prologue();                                                      \
    ninfer::cuda_plugin::gemv_warp<ninfer_jit::Bf16, TOKENS>(a, b, e);                                      \
  }

NINFER_GEMV_CC(1)
NINFER_GEMV_CC(2)

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

template <int TOKENS>
struct GemvWarpDefBase : TokenDefDefaults {
  using Args = ninfer_linear_args;
  static constexpr const char* op = NINFER_OP_LINEAR;
  static constexpr int threads = kCcThreads;
  static constexpr int tokens_per_cta = TOKENS;
  static constexpr int32_t geometry = NINFER_GEOMETRY_TOKEN_TILED;
  static constexpr uint32_t dtype_mask = kF32OrBf16Mask;
  static int32_t dtype(const Args& a) { return a.w_dtype; }
  // The kernel takes in_features and out_features as int.
  static int32_t supports(const void*, const ninfer_shape* s) {
    return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0 && s->dims[0] <= INT32_MAX && s->dims[1] <= INT32_MAX;
  }
  // No shared memory and no alignment demand (the template falls back to scalar loads), so the
  // contract's own checks are all there is.
  static const char* invalid(const Args& a, const ninfer_launch& l) { return linear_args_invalid(a, l, nullptr); }
  // grid.x: blocks of kCcRowsPerCta weight rows (from the shape alone); grid.y: the planner's
  // token tiles, strided over by the kernel beyond a grid dimension.
  static dim3 grid(const Args& a, const ninfer_launch& l) { return linear_grid(a.out_features, kCcRowsPerCta, l.grid_x); }
};

#define NINFER_GEMV_WARP_DEF(TOKENS)                                                                        \
  struct GemvWarpT##TOKENS##Def : GemvWarpDefBase<TOKENS> {                                                    \
    static constexpr const char* name = "gemv_warp_t" #TOKENS;                                                \
    static KernelPair kernels() {                                                                         \
      return {"ninfer_linear_gemv_warp_t" #TOKENS "_f32",                                                     \
              reinterpret_cast<const void*>(ninfer_linear_gemv_warp_t##TOKENS##_f32),                         \
              "ninfer_linear_gemv_warp_t" #TOKENS "_bf16",                                                    \
              reinterpret_cast<const void*>(ninfer_linear_gemv_warp_t##TOKENS##_bf16)};                       \
    }                                                                                                     \
  };
NINFER_GEMV_WARP_DEF(1)
NINFER_GEMV_WARP_DEF(2)

} // namespace

int32_t register_linear_gemv_warp(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<GemvWarpT1Def, GemvWarpT2Def>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
