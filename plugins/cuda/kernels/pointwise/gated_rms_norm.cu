// gated_rms_norm on CUDA (contract: ninfer/abi/ops/gated_rms_norm.h): each head's row
// normalised, weighted and gated by silu(z). The teams and kernel forms: norms_common.cuh.
#include "ninfer/abi/ops/gated_rms_norm.h"
#include "pointwise/norms_common.cuh"

namespace ninfer::cuda_plugin {
namespace {

template <bool kInRegisters>
__device__ void gated_rms_norm_rows(const ninfer_gated_rms_norm_args& a, int64_t begin, int64_t end) {
  __shared__ float red[32];
  const Teams tm = make_teams(a.heads, a.dim);
  for (int64_t t = begin + blockIdx.x; t < end; t += gridDim.x) {
    for (int h0 = 0; h0 < a.heads; h0 += tm.count) {
      const int h = h0 + tm.index;
      const bool active = h < a.heads;
      const int64_t row = static_cast<int64_t>(h) * a.dim;
      const float* x = a.x + t * a.x_token_stride + row;
      const float* z = a.z + t * a.z_token_stride + row;
      float* y = a.y + t * a.y_token_stride + row;
      if (kInRegisters && a.dim <= tm.size * kRegs) {
        float v[kRegs] = {}, w[kRegs] = {}, g[kRegs] = {};
        for_each_reg(active, a.dim, tm, [&](int u, int i) {
          v[u] = x[i];
          w[u] = a.weight[i];
          g[u] = z[i];
        });
        const float inv = rsqrtf(team_sum(sum_squares(v), tm, red) / a.dim + a.eps);
        for_each_reg(active, a.dim, tm, [&](int u, int i) { y[i] = v[u] * inv * w[u] * silu(g[u]); });
        continue;
      }
      const float ss = team_sum_squares(active, a.dim, tm, [&](int i) { return x[i]; });
      const float inv = rsqrtf(team_sum(ss, tm, red) / a.dim + a.eps);
      if (!active) continue;
      for (int i = tm.rank; i < a.dim; i += tm.size) y[i] = x[i] * inv * a.weight[i] * silu(z[i]);
    }
  }
}

} // namespace
} // namespace ninfer::cuda_plugin

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kNormThreads)
    ninfer_gated_rms_norm_two_pass_f32(ninfer_gated_rms_norm_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::gated_rms_norm_rows<false>(a, b, e);
}
extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kNormThreads)
    ninfer_gated_rms_norm_in_registers_f32(ninfer_gated_rms_norm_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::gated_rms_norm_rows<true>(a, b, e);
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

template <bool R>
struct GatedRmsNormDef : NormForm<R> {
  using Args = ninfer_gated_rms_norm_args;
  static constexpr const char* op = NINFER_OP_GATED_RMS_NORM;
  static KernelPair kernels() {
    return R ? KernelPair{"ninfer_gated_rms_norm_in_registers_f32",
                          reinterpret_cast<const void*>(ninfer_gated_rms_norm_in_registers_f32)}
             : KernelPair{"ninfer_gated_rms_norm_two_pass_f32", reinterpret_cast<const void*>(ninfer_gated_rms_norm_two_pass_f32)};
  }
};

} // namespace

int32_t register_gated_rms_norm(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<GatedRmsNormDef<false>, GatedRmsNormDef<true>>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
