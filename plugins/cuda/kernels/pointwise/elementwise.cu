// The elementwise gates: silu_mul (SwiGLU activation) and sigmoid_gate (Qwen3.5 attention
// output gate, in place). Contracts in ninfer/abi/ops/.
//
// A token's row is cut into kRowSlices slices, one CTA each (grid.y = split_k): a decode step
// has a single token, and one CTA per 17,408-wide MLP row would leave the GPU idle. Token tiles
// of one token are strided over grid.x. Each thread reads the elements it writes, so the
// in-place forms the contracts allow are safe.
#include <cuda_runtime.h>

#include "ninfer/abi/ops/sigmoid_gate.h"
#include "ninfer/abi/ops/silu_mul.h"
#include "common/pointwise_math.cuh"
#include "common/grid_dependency.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include "../../cuda_variant.hpp"
#include "pointwise/families.hpp"
#include "common/token_variant.cuh"
#endif

namespace ninfer::cuda_plugin {
namespace {

constexpr int kThreads = 256;
constexpr int kRowSlices = 8;
constexpr int kBatch = 4; // loads in flight per thread before the first use

// This CTA's slice [lo, hi) of a row of n elements.
__device__ void row_slice(int64_t n, int64_t& lo, int64_t& hi) {
  const int64_t len = (n + gridDim.y - 1) / gridDim.y;
  lo = min(n, static_cast<int64_t>(blockIdx.y) * len);
  hi = min(n, lo + len);
}

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
    ninfer_silu_mul_f32(ninfer_silu_mul_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::silu_mul_rows(a, b, e);
}
extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kThreads)
    ninfer_sigmoid_gate_f32(ninfer_sigmoid_gate_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::sigmoid_gate_rows(a, b, e);
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

// One token per tile, the row split over kRowSlices CTAs (the planner's grid.y = split_k).
struct SlicedRowsDefBase : TokenDefDefaults {
  static constexpr const char* name = "row_slices";
  static constexpr int threads = kThreads;
  static constexpr int split_k = kRowSlices;
};

struct SiluMulDef : SlicedRowsDefBase {
  using Args = ninfer_silu_mul_args;
  static constexpr const char* op = NINFER_OP_SILU_MUL;
  static KernelPair kernels() { return {"ninfer_silu_mul_f32", reinterpret_cast<const void*>(ninfer_silu_mul_f32)}; }
  static int32_t supports(const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0; }
};

struct SigmoidGateDef : SlicedRowsDefBase {
  using Args = ninfer_sigmoid_gate_args;
  static constexpr const char* op = NINFER_OP_SIGMOID_GATE;
  static KernelPair kernels() {
    return {"ninfer_sigmoid_gate_f32", reinterpret_cast<const void*>(ninfer_sigmoid_gate_f32)};
  }
  static int32_t supports(const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0; }
};

} // namespace

int32_t register_elementwise(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<SiluMulDef, SigmoidGateDef>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
