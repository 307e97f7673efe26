// norm_linear for one token in one wave: `gemv_4warps_one_wave` (contract:
// ninfer/abi/ops/norm_linear.h). linear's gemv_4warps_one_wave
// (linear/linear_gemv_4warps_one_wave.cu: 2 row pairs x 4 reduction slices per 256-thread CTA, a
// grid of at most the device's resident CTAs walking row blocks in turn, the next weight loads
// always in flight, the first before the launch wait; linear/row_pair_one_wave.cuh says why) with
// the block's RMS norm folded in, and for the MLP the SwiGLU (linear/norm_linear_common.cuh: a
// gated pair is gate row n and up row n + N/2).
//
// The norm is done once per CTA, not per row block: right after the launch wait (the first
// weight batch is in flight by then) the CTA stages x * (offset + norm weight) in shared memory
// and sums x^2 with a block reduction; every block then reads x from shared memory with nothing
// left of the norm in the loop but the inverse RMS, which scales the finished dot products.
// (gemv_warp_t1 and gemv_4warps read the norm weight next to x for every vector and sum x^2 per
// warp; without those two, gemv_warp_t1's decode step measured 1% faster.) Partial sums meet in
// shared memory in slice order: deterministic, so graph replay equals eager bit for bit.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/grid_dependency.cuh"
#include "linear/norm_linear_common.cuh"
#include "common/pointwise_math.cuh"
#include "linear/row_pair_one_wave.cuh"
#include "linear/weight_vec.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include "../../cuda_variant.hpp"
#include "common/token_variant.cuh"
#endif

namespace ninfer::cuda_plugin::norm_linear_4warps_one_wave {

using namespace split4; // the layout (linear/row_pair_stream.cuh)
constexpr int kMaxInFeatures = 16384; // the staged row: 64 KB of shared memory at most

// Dynamic shared memory: the staged row x * (offset + norm weight), in_features floats.
__host__ __device__ constexpr size_t smem_bytes(int64_t in_features) {
  return sizeof(float) * static_cast<size_t>(in_features);
}

// Row pairs of the projection: one per output gated (gate n, up n + N/2), else one per two outputs.
__host__ __device__ inline int64_t pairs(const ninfer_norm_linear_args& a) {
  return a.gated ? a.out_features / 2 : (a.out_features + 1) / 2;
}

// Stages token t's x * (offset + norm weight) into xs and returns the inverse RMS of x. Every
// thread of the CTA calls it (two barriers).
__device__ __forceinline__ float stage_normed_row(const ninfer_norm_linear_args& a, int64_t t, float* xs) {
  __shared__ float warp_ss[kWarps];
  const float* x = a.x + t * a.x_row_stride;
  const float offset = a.norm_offset ? 1.f : 0.f;
  const int K = a.in_features;
  float ss = 0.f;
  for (int k = 4 * threadIdx.x; k < K; k += 4 * kThreads) { // K % 8 == 0, x and norm_w 16-byte aligned
    const float4 xv = *reinterpret_cast<const float4*>(x + k);
    const float4 g = __ldg(reinterpret_cast<const float4*>(a.norm_w + k));
    ss += xv.x * xv.x + xv.y * xv.y + xv.z * xv.z + xv.w * xv.w;
    *reinterpret_cast<float4*>(xs + k) =
        make_float4(xv.x * (offset + g.x), xv.y * (offset + g.y), xv.z * (offset + g.z), xv.w * (offset + g.w));
  }
  ss = warp_sum(ss);
  if ((threadIdx.x & 31) == 0) warp_ss[threadIdx.x >> 5] = ss;
  __syncthreads(); // also publishes xs
  float total = 0.f;
#pragma unroll
  for (int j = 0; j < kWarps; ++j) total += warp_ss[j]; // the same order in every thread
  const float inv_rms = rsqrtf(total / K + a.eps);
  __syncthreads(); // warp_ss is rewritten by the next token
  return inv_rms;
}

template <class W>
__device__ void run(const ninfer_norm_linear_args& a, int64_t begin, int64_t end) {
  constexpr int V = WVec<W>::n;
  using Raw = typename WVec<W>::raw;
  extern __shared__ __align__(16) unsigned char smem[];
  float* const xs = reinterpret_cast<float*>(smem);
  __shared__ float partial[kWarps][2];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, group = warp / kSlices;
  const int K = a.in_features;
  const int blocks = static_cast<int>((pairs(a) + kGroups - 1) / kGroups);
  const auto pair_of = [&](int b) { return norm_linear::row_pair(a, static_cast<int64_t>(b) * kGroups + group); };
  const auto rows = [&](int b, int r) { return pair_of(b).row[r]; };
  const VectorRange range = slice_range(K / V, warp % kSlices, kSlices);
  const float offset = a.norm_offset ? 1.f : 0.f;
  for (int64_t t = begin; t < end; ++t) {
    float acc[2] = {0.f, 0.f}, inv_rms = 0.f;
    stream_row_pair_blocks<kSteps>(
        static_cast<const W*>(a.w), K, blocks, range, rows,
        [&] {
          if (t == begin) grid_dependency_prologue();
          inv_rms = stage_normed_row(a, t, xs);
          if (a.normed && blockIdx.x == 0)
            norm_linear::store_normed(a, t, a.x + t * a.x_row_stride, inv_rms, offset, threadIdx.x, kThreads);
        },
        [&](int v, const Raw (&wv)[2]) {
          dot2_step<W>(wv, [&](int i) { return *reinterpret_cast<const float4*>(xs + v * V + i); }, acc);
        },
        [&](int b) {
          const float s0 = warp_sum(acc[0]), s1 = warp_sum(acc[1]);
          acc[0] = acc[1] = 0.f;
          if (lane == 0) partial[warp][0] = s0, partial[warp][1] = s1;
          __syncthreads();
          const norm_linear::RowPair rp = pair_of(b);
          if (warp % kSlices == 0 && lane == 0 && rp.any) {
            float p0 = 0.f, p1 = 0.f;
#pragma unroll
            for (int j = 0; j < kSlices; ++j) p0 += partial[warp + j][0], p1 += partial[warp + j][1];
            norm_linear::store_outputs(a, t, rp, p0 * inv_rms, p1 * inv_rms);
          }
          __syncthreads(); // partial is rewritten for the next block
        });
    __syncthreads(); // xs is restaged for the next token
  }
  if (begin >= end) grid_dependency_prologue(); // an empty range still waits before it ends
}

} // namespace ninfer::cuda_plugin::norm_linear_4warps_one_wave

// No prologue first: the pipeline calls it after issuing the first weight loads.
extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::norm_linear_4warps_one_wave::kThreads)
    ninfer_norm_linear_gemv_4warps_one_wave_f32(ninfer_norm_linear_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::norm_linear_4warps_one_wave::run<float>(a, b, e);
}
extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::norm_linear_4warps_one_wave::kThreads)
    ninfer_norm_linear_gemv_4warps_one_wave_bf16(ninfer_norm_linear_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::norm_linear_4warps_one_wave::run<__nv_bfloat16>(a, b, e);
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

struct NormLinear4WarpsOneWaveDef : norm_linear::DefBase<norm_linear_4warps_one_wave::kGroups> {
  static constexpr const char* name = "gemv_4warps_one_wave";
  static constexpr int threads = norm_linear_4warps_one_wave::kThreads;
  static KernelPair kernels() {
    return {"ninfer_norm_linear_gemv_4warps_one_wave_f32", reinterpret_cast<const void*>(ninfer_norm_linear_gemv_4warps_one_wave_f32),
            "ninfer_norm_linear_gemv_4warps_one_wave_bf16", reinterpret_cast<const void*>(ninfer_norm_linear_gemv_4warps_one_wave_bf16)};
  }
  static size_t dynamic_smem(const void*, const ninfer_shape* s) { return norm_linear_4warps_one_wave::smem_bytes(s->dims[0]); }
  static int32_t supports(const void*, const ninfer_shape* s) {
    return DefBase::supports(nullptr, s) && s->dims[0] <= norm_linear_4warps_one_wave::kMaxInFeatures;
  }
  static const char* invalid(const Args& a, const ninfer_launch& l) {
    if (const char* why = DefBase::invalid(a, l)) return why;
    if (norm_linear_4warps_one_wave::smem_bytes(a.in_features) > l.dynamic_smem_bytes)
      return "in_features is larger than the planned shape's dims[0]";
    return nullptr;
  }
  // One wave: the row blocks, at most as many CTAs as the device holds at once.
  static dim3 grid(const Args& a, const ninfer_launch& l) {
    const TokenKernel k = a.w_dtype == NINFER_DTYPE_BF16 ? kernels().bf16 : kernels().f32;
    return one_wave_grid(k, norm_linear_4warps_one_wave::kThreads, l.dynamic_smem_bytes, norm_linear_4warps_one_wave::pairs(a),
                         norm_linear_4warps_one_wave::kGroups);
  }
};

} // namespace

int32_t register_norm_linear_gemv_4warps_one_wave(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<NormLinear4WarpsOneWaveDef>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
