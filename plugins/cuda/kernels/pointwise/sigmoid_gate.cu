// sigmoid_gate on CUDA (contract: ninfer/abi/ops/sigmoid_gate.h): the Qwen3.5 attention output
// gate, in place, a token's row cut into slices (pointwise/row_slices.cuh).
#include "ninfer/abi/ops/sigmoid_gate.h"
#include "pointwise/row_slices.cuh"

namespace ninfer::cuda_plugin {
namespace {

__device__ void sigmoid_gate_rows(const ninfer_sigmoid_gate_args& a, int64_t begin, int64_t end) {
  int64_t lo, hi;
  row_slice(static_cast<int64_t>(a.heads) * a.head_dim, lo, hi);
  for (int64_t t = begin + blockIdx.x; t < end; t += gridDim.x) {
    float* x = a.x + t * a.x_token_stride;
    const float* g = a.gate + t * a.gate_token_stride;
    for (int64_t f0 = lo + threadIdx.x; f0 < hi; f0 += kThreads * kBatch) {
      float xv[kBatch], gv[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int64_t f = f0 + k * kThreads;
        const int64_t h = f / a.head_dim, d = f % a.head_dim;
        xv[k] = f < hi ? x[f] : 0.f;
        gv[k] = f < hi ? g[h * a.gate_head_stride + d] : 0.f;
      }
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int64_t f = f0 + k * kThreads;
        if (f < hi) x[f] = xv[k] * sigmoid(gv[k]);
      }
    }
  }
}

} // namespace
} // namespace ninfer::cuda_plugin

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kThreads)
    ninfer_sigmoid_gate_f32(ninfer_sigmoid_gate_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::sigmoid_gate_rows(a, b, e);
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

struct SigmoidGateDef : SlicedRowsDefBase {
  using Args = ninfer_sigmoid_gate_args;
  static constexpr const char* op = NINFER_OP_SIGMOID_GATE;
  static KernelPair kernels() {
    return {"ninfer_sigmoid_gate_f32", reinterpret_cast<const void*>(ninfer_sigmoid_gate_f32)};
  }
  static int32_t supports(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0; }
};

} // namespace

int32_t register_sigmoid_gate(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<SigmoidGateDef>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
