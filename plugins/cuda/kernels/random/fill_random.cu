// fill_random on the GPU (contract: ninfer/abi/ops/fill_random.h): the same counter-based hash
// as the CPU reference, so a benchmark model built on the device holds exactly the bits the
// CPU plugin would build (float weights, or the code bytes of quantized ones). Grid-stride over rows of NINFER_FILL_RANDOM_ROW elements.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "ninfer/abi/ops/fill_random.h"
#include "ninfer/abi/plugin_abi.h"
#include "common/grid_dependency.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include "common/token_variant.cuh"
#endif

namespace ninfer::cuda_plugin {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__host__ __device__ __forceinline__ bool is_code_dtype(int32_t d) {
  return d == NINFER_DTYPE_INT4 || d == NINFER_DTYPE_INT8 || d == NINFER_DTYPE_FP8_E4M3;
}

__device__ __forceinline__ uint64_t hash_at(const ninfer_fill_random_args& a, int64_t i) {
  return mix64(a.seed ^ (static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull));
}

__device__ __forceinline__ float value_at(const ninfer_fill_random_args& a, int64_t i) {
  const uint64_t h = hash_at(a, i);
  // Same operations, in the same order and precision, as the reference: fmaf would round once
  // instead of twice and change the last bit.
  const float u = __fsub_rn(__fmul_rn(static_cast<float>(h >> 40), 0x1.0p-23f), 1.0f);
  return __fadd_rn(a.offset, __fmul_rn(a.scale, u));
}

__device__ void fill_rows(const ninfer_fill_random_args& a, int64_t begin, int64_t end) {
  for (int64_t r = begin + blockIdx.x; r < end; r += gridDim.x) {
    const int64_t lo = r * NINFER_FILL_RANDOM_ROW;
    const int64_t hi = min(a.count, lo + NINFER_FILL_RANDOM_ROW);
    if (is_code_dtype(a.dtype)) {
      for (int64_t i = lo + threadIdx.x; i < hi; i += kThreads) {
        const auto byte = static_cast<uint8_t>(hash_at(a, i) >> 56);
        static_cast<uint8_t*>(a.out)[i] = a.dtype == NINFER_DTYPE_FP8_E4M3 ? byte & 0xBFu : byte;
      }
      continue;
    }
    for (int64_t i = lo + threadIdx.x; i < hi; i += kThreads) {
      const float v = value_at(a, i);
      if (a.dtype == NINFER_DTYPE_F32)
        static_cast<float*>(a.out)[i] = v;
      else
        static_cast<__nv_bfloat16*>(a.out)[i] = __float2bfloat16_rn(v);
    }
  }
}

} // namespace
} // namespace ninfer::cuda_plugin

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kThreads)
    ninfer_fill_random(ninfer_fill_random_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::fill_rows(a, b, e);
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

struct FillRandomDef : TokenDefDefaults {
  using Args = ninfer_fill_random_args;
  static constexpr const char* op = NINFER_OP_FILL_RANDOM;
  static constexpr const char* name = "grid_stride";
  static constexpr int threads = kThreads;
  static constexpr uint32_t dtype_mask = kF32OrBf16Mask | (1u << NINFER_DTYPE_INT4) | (1u << NINFER_DTYPE_INT8) |
                                         (1u << NINFER_DTYPE_FP8_E4M3);
  static KernelPair kernels() { return {"ninfer_fill_random", reinterpret_cast<const void*>(ninfer_fill_random)}; }
  static int32_t supports(const void*, const ninfer_shape* s) { return s->tokens > 0; }
  static int32_t dtype(const Args& a) { return a.dtype; }
  static const char* invalid(const Args& a, const ninfer_launch&) {
    return a.dtype == NINFER_DTYPE_F32 || a.dtype == NINFER_DTYPE_BF16 || is_code_dtype(a.dtype)
               ? nullptr
               : "dtype must be F32, BF16, INT4, INT8 or FP8_E4M3";
  }
};

} // namespace

int32_t register_fill_random(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<FillRandomDef>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
