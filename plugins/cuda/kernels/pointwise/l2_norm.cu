// l2_norm on CUDA (contract: ninfer/abi/ops/l2_norm.h), in place over each head's row. The
// teams and kernel forms: norms_common.cuh.
#include "ninfer/abi/ops/l2_norm.h"
#include "pointwise/norms_common.cuh"

namespace ninfer::cuda_plugin {
namespace {

template <bool kInRegisters>
__device__ void l2_norm_rows(const ninfer_l2_norm_args& a, int64_t begin, int64_t end) {
  __shared__ float red[32];
  const Teams tm = make_teams(a.heads, a.dim);
  for (int64_t t = begin + blockIdx.x; t < end; t += gridDim.x) {
    for (int h0 = 0; h0 < a.heads; h0 += tm.count) {
      const int h = h0 + tm.index;
      const bool active = h < a.heads;
      float* x = a.x + t * a.token_stride + h * a.head_stride;
      if (kInRegisters && a.dim <= tm.size * kRegs) {
        float v[kRegs] = {};
        for_each_reg(active, a.dim, tm, [&](int u, int i) { v[u] = x[i]; });
        const float inv = rsqrtf(team_sum(sum_squares(v), tm, red) + a.eps);
        for_each_reg(active, a.dim, tm, [&](int u, int i) { x[i] = v[u] * inv; });
        continue;
      }
      const float ss = team_sum_squares(active, a.dim, tm, [&](int i) { return x[i]; });
      const float inv = rsqrtf(team_sum(ss, tm, red) + a.eps);
      if (!active) continue;
      for (int i = tm.rank; i < a.dim; i += tm.size) x[i] *= inv;
    }
  }
}

} // namespace
} // namespace ninfer::cuda_plugin

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kNormThreads)
    ninfer_l2_norm_two_pass_f32(ninfer_l2_norm_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::l2_norm_rows<false>(a, b, e);
}
extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kNormThreads)
    ninfer_l2_norm_in_registers_f32(ninfer_l2_norm_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::l2_norm_rows<true>(a, b, e);
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

template <bool R>
struct L2NormDef : NormForm<R> {
  using Args = ninfer_l2_norm_args;
  static constexpr const char* op = NINFER_OP_L2_NORM;
  static KernelPair kernels() {
    return R ? KernelPair{"ninfer_l2_norm_in_registers_f32", reinterpret_cast<const void*>(ninfer_l2_norm_in_registers_f32)}
             : KernelPair{"ninfer_l2_norm_two_pass_f32", reinterpret_cast<const void*>(ninfer_l2_norm_two_pass_f32)};
  }
};

} // namespace

int32_t register_l2_norm(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<L2NormDef<false>, L2NormDef<true>>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
