// rms_norm on CUDA (contract: ninfer/abi/ops/rms_norm.h): plain and (1+w) weights, an optional
// fused residual add, per-head rows with strides. The teams and kernel forms: norms_common.cuh.
#include "ninfer/abi/ops/rms_norm.h"
#include "pointwise/norms_common.cuh"

namespace ninfer::cuda_plugin {
namespace {

template <bool kInRegisters>
__device__ void rms_norm_rows(const ninfer_rms_norm_args& a, int64_t begin, int64_t end) {
  __shared__ float red[32];
  const Teams tm = make_teams(a.groups, a.dim);
  const float offset = a.weight_offset ? 1.f : 0.f;
  for (int64_t t = begin + blockIdx.x; t < end; t += gridDim.x) {
    for (int j0 = 0; j0 < a.groups; j0 += tm.count) {
      const int j = j0 + tm.index;
      const bool active = j < a.groups;
      const float* x = a.x + t * a.x_token_stride + j * a.x_group_stride;
      float* y = a.y + t * a.y_token_stride + j * a.y_group_stride;
      float* res = a.residual ? a.residual + t * a.residual_token_stride + j * a.residual_group_stride : nullptr;
      if (kInRegisters && a.dim <= tm.size * kRegs) {
        float v[kRegs] = {}, w[kRegs] = {};
        for_each_reg(active, a.dim, tm, [&](int u, int i) {
          v[u] = res ? x[i] + res[i] : x[i];
          w[u] = offset + a.weight[i];
        });
        if (res) for_each_reg(active, a.dim, tm, [&](int u, int i) { res[i] = v[u]; });
        const float inv = rsqrtf(team_sum(sum_squares(v), tm, red) / a.dim + a.eps);
        for_each_reg(active, a.dim, tm, [&](int u, int i) { y[i] = v[u] * inv * w[u]; });
        continue;
      }
      const float ss = team_sum_squares(active, a.dim, tm, [&](int i) {
        if (!res) return x[i];
        const float s = x[i] + res[i];
        res[i] = s;
        return s;
      });
      const float inv = rsqrtf(team_sum(ss, tm, red) / a.dim + a.eps);
      if (!active) continue;
      const float* s = res ? res : x;
      for (int i = tm.rank; i < a.dim; i += tm.size) y[i] = s[i] * inv * (offset + a.weight[i]);
    }
  }
}

} // namespace
} // namespace ninfer::cuda_plugin

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kNormThreads)
    ninfer_rms_norm_two_pass_f32(ninfer_rms_norm_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::rms_norm_rows<false>(a, b, e);
}
extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kNormThreads)
    ninfer_rms_norm_in_registers_f32(ninfer_rms_norm_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::rms_norm_rows<true>(a, b, e);
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

template <bool R>
struct RmsNormDef : NormForm<R> {
  using Args = ninfer_rms_norm_args;
  static constexpr const char* op = NINFER_OP_RMS_NORM;
  static KernelPair kernels() {
    return R ? KernelPair{"ninfer_rms_norm_in_registers_f32", reinterpret_cast<const void*>(ninfer_rms_norm_in_registers_f32)}
             : KernelPair{"ninfer_rms_norm_two_pass_f32", reinterpret_cast<const void*>(ninfer_rms_norm_two_pass_f32)};
  }
};

} // namespace

int32_t register_rms_norm(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<RmsNormDef<false>, RmsNormDef<true>>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
