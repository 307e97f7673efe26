// silu_mul on CUDA (contract: ninfer/abi/ops/silu_mul.h): the SwiGLU activation, a token's row
// cut into slices (pointwise/row_slices.cuh).
#include "ninfer/abi/ops/silu_mul.h"
#include "pointwise/row_slices.cuh"

namespace ninfer::cuda_plugin {
namespace {

__device__ void silu_mul_rows(const ninfer_silu_mul_args& a, int64_t begin, int64_t end) {
  int64_t lo, hi;
  row_slice(a.width, lo, hi);
  for (int64_t t = begin + blockIdx.x; t < end; t += gridDim.x) {
    const float* g = a.gate + t * a.gate_row_stride;
    const float* u = a.up + t * a.up_row_stride;
    float* o = a.out + t * a.out_row_stride;
    for (int64_t i0 = lo + threadIdx.x; i0 < hi; i0 += kThreads * kBatch) {
      float gv[kBatch], uv[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int64_t i = i0 + k * kThreads;
        gv[k] = i < hi ? g[i] : 0.f;
        uv[k] = i < hi ? u[i] : 0.f;
      }
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int64_t i = i0 + k * kThreads;
        if (i < hi) o[i] = silu(gv[k]) * uv[k];
      }
    }
  }
}

} // namespace
} // namespace ninfer::cuda_plugin

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kThreads)
    ninfer_silu_mul_f32(ninfer_silu_mul_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::silu_mul_rows(a, b, e);
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

struct SiluMulDef : SlicedRowsDefBase {
  using Args = ninfer_silu_mul_args;
  static constexpr const char* op = NINFER_OP_SILU_MUL;
  static KernelPair kernels() { return {"ninfer_silu_mul_f32", reinterpret_cast<const void*>(ninfer_silu_mul_f32)}; }
  static int32_t supports(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0; }
};

} // namespace

int32_t register_silu_mul(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<SiluMulDef>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
