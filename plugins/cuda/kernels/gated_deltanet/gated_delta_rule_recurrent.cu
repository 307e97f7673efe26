// gated_delta_rule, recurrent form on CUDA (contract: ninfer/abi/ops/gated_delta_rule.h): the
// contract's four lines, token by token. Used for decode steps (one token per sequence) and
// speculative verification (the only form that writes token states); it computes any call, so
// it is also the fallback where the chunked form's tiles do not fit.
//
// The value columns of the state are independent (u_j, the update of column j and out_j read
// and write column j only), so a CTA owns one (sequence, value head, block of kCols value
// columns): lane = column, the warps split the key rows, and the two reductions over key rows
// (S^T k and S^T q) meet in shared memory. The CTA's [k_dim, kCols] slice of the float32 state
// lives in shared memory while it walks the sequence's tokens; every element is touched by
// one thread only, so the state needs no barrier, and it is read from the slot once and
// written back once. A decode step is bound by that traffic: 2 x k_dim x v_dim x 4 bytes per
// (sequence, value head).
//
// Faster later: keep the slice in registers (k_dim / warps values per thread when k_dim is a
// compile-time 128), and fuse the step with its neighbours (conv, l2 norm, gated norm) so a
// decode step reads q, k and v once.
#include <cuda_runtime.h>

#include "gated_deltanet/common.cuh"
#include "ninfer/abi/ops/gated_delta_rule.h"
#include "common/grid_dependency.cuh"

namespace ninfer::cuda_plugin::gated_deltanet {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kCols = 32; // value columns per CTA: one per lane

// Shared memory in floats: state slice [k_dim][kCols], k and scale*q of the token [2][k_dim],
// the two reductions' partial sums [2][kWarps][kCols].
#ifndef __CUDACC_RTC__ // host side
size_t smem_floats(int64_t k_dim) { return k_dim * kCols + 2 * k_dim + 2 * kWarps * kCols; }
#endif

__device__ void recurrent(const ninfer_gated_delta_rule_args& a, int64_t begin, int64_t end) {
  const int K = a.k_dim, V = a.v_dim, Hv = a.v_heads;
  float* S = reinterpret_cast<float*>(ninfer_gated_deltanet_smem);
  float* kq = S + K * kCols;
  float* red = kq + 2 * K;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int vblocks = (V + kCols - 1) / kCols;
  const int h = blockIdx.z / vblocks;
  const int col = (blockIdx.z % vblocks) * kCols + lane;
  const bool col_ok = col < V;
  const int kh = h / (Hv / a.k_heads);
  for (int seq = blockIdx.x; seq < a.batch.num_seqs; seq += gridDim.x) {
    const int t0 = a.batch.seq_start[seq], t1 = a.batch.seq_start[seq + 1];
    if (t0 < begin || t1 > end || t0 >= t1) continue; // whole CTA alike
    float* st = a.state + (static_cast<int64_t>(a.batch.seq_slot[seq]) * Hv + h) * K * V;
    for (int d = warp; d < K; d += kWarps) S[d * kCols + lane] = col_ok ? st[static_cast<int64_t>(d) * V + col] : 0.f;
    for (int t = t0; t < t1; ++t) {
      const int64_t qk_row = static_cast<int64_t>(t) * a.qk_token_stride + static_cast<int64_t>(kh) * K;
      for (int i = threadIdx.x; i < K; i += kThreads) {
        kq[i] = a.k[qk_row + i];
        kq[K + i] = a.scale * a.q[qk_row + i];
      }
      __syncthreads();
      const float decay = expf(a.g[static_cast<int64_t>(t) * Hv + h]);
      const float beta = a.beta[static_cast<int64_t>(t) * Hv + h];
      // S *= decay; pred = S^T k
      float part = 0.f;
      for (int d = warp; d < K; d += kWarps) {
        const float s = S[d * kCols + lane] * decay;
        S[d * kCols + lane] = s;
        part = fmaf(s, kq[d], part);
      }
      red[warp * kCols + lane] = part;
      __syncthreads();
      float pred = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) pred += red[w * kCols + lane];
      const float v = col_ok ? a.v[static_cast<int64_t>(t) * a.v_token_stride + static_cast<int64_t>(h) * V + col] : 0.f;
      const float u = beta * (v - pred);
      // S += k u^T; out = S^T (scale q)
      part = 0.f;
      for (int d = warp; d < K; d += kWarps) {
        const float s = fmaf(kq[d], u, S[d * kCols + lane]);
        S[d * kCols + lane] = s;
        part = fmaf(s, kq[K + d], part);
      }
      red[(kWarps + warp) * kCols + lane] = part;
      __syncthreads();
      if (warp == 0 && col_ok) {
        float o = 0.f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) o += red[(kWarps + w) * kCols + lane];
        a.out[static_cast<int64_t>(t) * a.out_token_stride + static_cast<int64_t>(h) * V + col] = o;
      }
      // Speculative verification keeps the state after every token (the thread's own elements).
      if (a.token_states && col_ok) {
        float* ts = a.token_states + (static_cast<int64_t>(t) * Hv + h) * K * V;
        for (int d = warp; d < K; d += kWarps) ts[static_cast<int64_t>(d) * V + col] = S[d * kCols + lane];
      }
    }
    if (col_ok)
      for (int d = warp; d < K; d += kWarps) st[static_cast<int64_t>(d) * V + col] = S[d * kCols + lane];
  }
}

} // namespace
} // namespace ninfer::cuda_plugin::gated_deltanet

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::gated_deltanet::kThreads)
    ninfer_gated_delta_rule_recurrent(ninfer_gated_delta_rule_args a, int64_t token_begin, int64_t token_end) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::gated_deltanet::recurrent(a, token_begin, token_end);
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin::gated_deltanet {
namespace {

const KernelInfo kKernel = {NINFER_OP_GATED_DELTA_RULE, "recurrent", "ninfer_gated_delta_rule_recurrent",
                            reinterpret_cast<const void*>(ninfer_gated_delta_rule_recurrent), kThreads};

// Every shape, token states (NINFER_SHAPE_TOKEN_STATES) included.
int32_t supports(const void*, const ninfer_shape* s) {
  return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0 && s->dims[2] > 0 && s->dims[3] > 0;
}

size_t dynamic_smem(const void*, const ninfer_shape* s) { return sizeof(float) * smem_floats(s->dims[2]); }

int32_t launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  ninfer_gated_delta_rule_args a = *static_cast<const ninfer_gated_delta_rule_args*>(args);
  if (int32_t rc = check_head_ratio("gated_delta_rule/recurrent", a.k_heads, a.v_heads, err, err_len); rc != NINFER_OK)
    return rc;
  if (l->dynamic_smem_bytes < sizeof(float) * smem_floats(a.k_dim))
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                "gated_delta_rule/recurrent: planned for k_dim below %d (%zu B shared memory, %zu needed)", a.k_dim,
                l->dynamic_smem_bytes, sizeof(float) * smem_floats(a.k_dim));
  if (a.batch.num_seqs <= 0 || a.k_dim <= 0 || a.v_dim <= 0) return NINFER_OK;
  int64_t b = l->token_begin, e = l->token_end;
  void* params[] = {&a, &b, &e};
  const int64_t problems = static_cast<int64_t>(a.v_heads) * ((a.v_dim + kCols - 1) / kCols);
  if (problems > kMaxGridZ)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                "gated_delta_rule/recurrent: %d value heads x %d columns exceed the %d CTAs grid.z holds", a.v_heads,
                a.v_dim, kMaxGridZ);
  return launch_kernel(kKernel, dim3(l->grid_x, l->grid_y, static_cast<unsigned>(problems)), l, params, stream, err, err_len);
}

} // namespace

int32_t register_gated_delta_rule_recurrent(const ninfer_registrar* r, char* err, size_t err_len) {
  return register_form<kKernel>(r, 1, 1, {dynamic_smem, supports, launch}, err, err_len);
}

} // namespace ninfer::cuda_plugin::gated_deltanet
#endif // __CUDACC_RTC__
