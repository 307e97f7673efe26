// rms_norm on CUDA (contract: ninfer/abi/ops/rms_norm.h): plain and (1+w) weights, an optional
// fused residual add, per-head rows with strides. The teams and kernel forms: norms_common.cuh.
#include "ninfer/abi/ops/rms_norm.h"
#include "pointwise/norms_common.cuh"

namespace ninfer::cuda_plugin {
namespace {

// Whether every row of the call is one CTA's and lies in 16-byte vectors: x, y, the residual and
// the weights aligned, strides and dim multiples of 4.
__device__ __forceinline__ bool vector_rows(const ninfer_rms_norm_args& a, const Teams& tm) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return tm.count == 1 && a.groups == 1 && a.dim % 4 == 0 && a.x_token_stride % 4 == 0 &&
         a.y_token_stride % 4 == 0 && aligned(a.x) && aligned(a.y) && aligned(a.weight) &&
         (!a.residual || (a.residual_token_stride % 4 == 0 && aligned(a.residual)));
}

// One row of up to kRegs * blockDim elements by the whole CTA in float4s: every load of the row,
// its residual and its weights in flight at once, a quarter of the scalar path's instructions.
// ncu put the scalar path at 9.2 us for a Qwen3.5-27B row of 5,120 (one CTA, ~680 instructions
// per warp waiting on their loads' scoreboard), where a decode step runs 129 of them.
__device__ __forceinline__ void rms_norm_vector_row(const ninfer_rms_norm_args& a, int64_t t, const Teams& tm,
                                                    float* red) {
  constexpr int kVecs = kRegs / 4;
  const float offset = a.weight_offset ? 1.f : 0.f;
  const float4* x = reinterpret_cast<const float4*>(a.x + t * a.x_token_stride);
  const float4* w = reinterpret_cast<const float4*>(a.weight);
  float4* res = a.residual ? reinterpret_cast<float4*>(a.residual + t * a.residual_token_stride) : nullptr;
  float4* y = reinterpret_cast<float4*>(a.y + t * a.y_token_stride);
  const int nv = a.dim / 4;
  float4 v[kVecs], s[kVecs];
  float ss = 0.f;
#pragma unroll
  for (int u = 0; u < kVecs; ++u) {
    const int i = tm.rank + u * tm.size;
    v[u] = s[u] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (i < nv) {
      v[u] = x[i];
      s[u] = w[i];
      if (res) {
        const float4 r = res[i];
        v[u] = make_float4(v[u].x + r.x, v[u].y + r.y, v[u].z + r.z, v[u].w + r.w);
      }
    }
  }
#pragma unroll
  for (int u = 0; u < kVecs; ++u) {
    ss += v[u].x * v[u].x + v[u].y * v[u].y + v[u].z * v[u].z + v[u].w * v[u].w;
    if (res && tm.rank + u * tm.size < nv) res[tm.rank + u * tm.size] = v[u];
  }
  const float inv = rsqrtf(team_sum(ss, tm, red) / a.dim + a.eps);
#pragma unroll
  for (int u = 0; u < kVecs; ++u) {
    const int i = tm.rank + u * tm.size;
    if (i < nv)
      y[i] = make_float4(v[u].x * inv * (offset + s[u].x), v[u].y * inv * (offset + s[u].y),
                         v[u].z * inv * (offset + s[u].z), v[u].w * inv * (offset + s[u].w));
  }
}

template <bool kInRegisters>
__device__ void rms_norm_rows(const ninfer_rms_norm_args& a, int64_t begin, int64_t end) {
  __shared__ float red[32];
  const Teams tm = make_teams(a.groups, a.dim);
  const float offset = a.weight_offset ? 1.f : 0.f;
  if (kInRegisters && a.dim <= tm.size * kRegs && vector_rows(a, tm)) {
    for (int64_t t = begin + blockIdx.x; t < end; t += gridDim.x) rms_norm_vector_row(a, t, tm, red);
    return;
  }
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
