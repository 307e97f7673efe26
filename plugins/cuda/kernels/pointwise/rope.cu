// rope: rotary position embedding in the half-split (Qwen / GPT-NeoX) layout, full or partial,
// in place (contract: ninfer/abi/ops/rope.h).
//
// One CTA per token (grid-stride over the launch's tokens). The CTA first computes the token's
// cos/sin table for the rotary_dim / 2 frequencies, then rotates every head's pairs with it.
// Precision: the angle p * inv_freq is formed and reduced modulo 2*pi in double (at position
// 262,144 a float32 angle would be off by ~0.01 rad), then the reduced angle in [-pi, pi] goes
// to the float32 sincosf. Only that product and the reduction need double, so consumer cards
// with slow float64 pay for rotary_dim / 2 of them per token, not per element.
#include <cuda_runtime.h>

#include "ninfer/abi/ops/rope.h"
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

__device__ void rope_rows(const ninfer_rope_args& a, int64_t begin, int64_t end) {
  // Dynamic shared memory: inv_freq (double) then cos and sin (float), rotary_dim / 2 each.
  extern __shared__ __align__(16) unsigned char smem[];
  const int half = a.rotary_dim / 2;
  double* inv_freq = reinterpret_cast<double*>(smem);
  float* cs = reinterpret_cast<float*>(inv_freq + half);
  float* sn = cs + half;
  for (int i = threadIdx.x; i < half; i += blockDim.x) inv_freq[i] = rope_inv_freq(a.theta, i, a.rotary_dim);
  __syncthreads();
  for (int64_t t = begin + blockIdx.x; t < end; t += gridDim.x) {
    const double p = a.positions[t];
    for (int i = threadIdx.x; i < half; i += blockDim.x) rope_sin_cos(p, inv_freq[i], &sn[i], &cs[i]);
    __syncthreads();
    float* row0 = a.x + t * a.token_stride;
    const int pairs = a.heads * half;
    for (int f = threadIdx.x; f < pairs; f += blockDim.x) {
      const int h = f / half, i = f % half;
      float* x = row0 + h * a.head_stride;
      const float x1 = x[i], x2 = x[i + half];
      x[i] = x1 * cs[i] - x2 * sn[i];
      x[i + half] = x2 * cs[i] + x1 * sn[i];
    }
    __syncthreads(); // cs/sn are rewritten for the next token
  }
}

} // namespace
} // namespace ninfer::cuda_plugin

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kThreads)
    ninfer_rope_f32(ninfer_rope_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::rope_rows(a, b, e);
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

struct RopeDef : TokenDefDefaults {
  using Args = ninfer_rope_args;
  static constexpr const char* op = NINFER_OP_ROPE;
  static constexpr const char* name = "token_table";
  static constexpr int threads = kThreads;
  static KernelPair kernels() { return {"ninfer_rope_f32", reinterpret_cast<const void*>(ninfer_rope_f32)}; }
  static int32_t supports(const void*, const ninfer_shape* s) {
    const int64_t head_dim = s->dims[0], heads = s->dims[1], rotary = s->dims[2];
    return s->tokens > 0 && head_dim > 0 && heads > 0 && rotary > 0 && rotary % 2 == 0 && rotary <= head_dim;
  }
  static const char* invalid(const Args& a, const ninfer_launch& l) {
    if (a.rotary_dim <= 0 || a.rotary_dim % 2 || a.rotary_dim > a.head_dim)
      return "rotary_dim must be even and in (0, head_dim]";
    if (l.dynamic_smem_bytes < static_cast<size_t>(a.rotary_dim / 2) * (sizeof(double) + 2 * sizeof(float)))
      return "rotary_dim is larger than the planned shape's dims[2]";
    return nullptr;
  }
  static size_t dynamic_smem(const void*, const ninfer_shape* s) {
    const size_t half = static_cast<size_t>(s->dims[2] > 0 ? s->dims[2] / 2 : 0);
    return half * (sizeof(double) + 2 * sizeof(float));
  }
};

} // namespace

int32_t register_rope(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<RopeDef>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
