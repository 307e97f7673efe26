// gated_delta_step on CUDA, head dims 128 only (contract: ninfer/abi/ops/gated_delta_step.h):
// a Gated DeltaNet decode step after the conv in one launch, where the unfused ops spend three
// (gdn_gating, gated_delta_rule "recurrent", gated_rms_norm) and write g, beta and o to memory
// between them. Every released Qwen3.5 / 3.6 has k_dim = v_dim = 128; other shapes run the
// unfused ops (the model decides).
//
// One CTA of 256 threads per (sequence, value head): grid.x strides over the call's sequences
// (those inside the launch's tokens), grid.y is the value head, and the CTA walks the sequence's
// tokens in order: one for a decode step, the drafts and their root for a verification pass,
// which also writes the state after every token (token states). Thread tid owns value column
// c = tid % 128 and key rows [64 rb, 64 rb + 64) with rb = tid / 128: its 64 state entries
// S[r][c] live in registers for the whole walk, loaded and stored row by row so that a warp
// touches 128 consecutive bytes.
// Every element of the state has one owner, so the state needs no barrier; the two
// reductions over key rows (S^T k and S^T q) add the two halves' partial sums in shared memory.
// The gating (decay = exp(g), beta) is a handful of flops that every thread evaluates from
// a, b, a_log and dt_bias itself, so no barrier waits for it. The output norm is over the 128
// columns of the head, i.e. over one half of the CTA.
//
// A decode step moves 2 x 64 KB of state per (sequence, value head); everything else (q, k, v,
// z: 2 KB) is small, and all of a thread's loads are issued before the first barrier.
#include <cuda_runtime.h>

#include "gated_deltanet/common.cuh"
#include "gated_deltanet/gdn_gating_common.cuh"
#include "common/grid_dependency.cuh"
#include "ninfer/abi/ops/gated_delta_step.h"
#include "common/pointwise_math.cuh"

namespace ninfer::cuda_plugin::gated_deltanet {
namespace {

constexpr int kThreads = 256;
constexpr int kDim = 128;             // k_dim = v_dim, the only shape supported
constexpr int kRows = kDim / 2;       // key rows per thread (two halves of the CTA)
constexpr int kWarps = kThreads / 32;

// Shared memory in floats: k and scale*q [2][kDim], the partial sums of S^T k and of S^T q
// [2][2][kDim], one sum of squares per warp.
constexpr int kSmemFloats = 2 * kDim + 4 * kDim + kWarps;
#ifndef __CUDACC_RTC__ // host side
constexpr size_t kSmemBytes = sizeof(float) * kSmemFloats;
#endif

__device__ void gated_delta_step_decode(const ninfer_gated_delta_step_args& a, int64_t begin, int64_t end) {
  float* kq = reinterpret_cast<float*>(ninfer_gated_deltanet_smem); // k [0, kDim), scale*q [kDim, 2 kDim)
  float* pred_part = kq + 2 * kDim;                      // [2][kDim]
  float* o_part = pred_part + 2 * kDim;                  // [2][kDim]
  float* ss_part = o_part + 2 * kDim;                    // [kWarps]
  const int tid = threadIdx.x, c = tid % kDim, rb = tid / kDim;
  const int warp = tid >> 5, lane = tid & 31;
  const int h = blockIdx.y, Hv = a.v_heads;
  const int kh = h / (Hv / a.k_heads);
  // Per head, the same for every token.
  const float neg_a_exp = -expf(a.a_log[h]);
  const float dt_bias = a.dt_bias[h];
  const float norm_w = a.norm_w[c];
  // This thread's element offset in a [v_heads, k_dim, v_dim] state: row rb * kRows, column c.
  const int64_t elem = (static_cast<int64_t>(h) * kDim + rb * kRows) * kDim + c;
  const auto in_launch = [&](int seq) {
    const int32_t t0 = a.batch.seq_start[seq], t1 = a.batch.seq_start[seq + 1];
    return t0 >= begin && t1 <= end && t0 < t1; // whole CTA alike
  };
  float S[kRows];
  float* st = nullptr;
  const auto load_state = [&](int seq) {
    st = a.state + static_cast<int64_t>(a.batch.seq_slot[seq]) * Hv * kDim * kDim + elem;
#pragma unroll
    for (int r = 0; r < kRows; ++r) S[r] = st[r * kDim];
  };
  // The head's weights above and the first sequence's state rows are loaded before the launch
  // wait (common/grid_dependency.cuh): only this op writes the state, so the kernel running
  // before this one (the conv) cannot be writing them; the batch arrays were uploaded before
  // the step.
  int seq = blockIdx.x;
  const bool first_loaded = seq < a.batch.num_seqs && in_launch(seq);
  if (first_loaded) load_state(seq);
  grid_dependency_prologue();
  for (; seq < a.batch.num_seqs; seq += gridDim.x) {
    if (!in_launch(seq)) continue;
    if (!(first_loaded && seq == static_cast<int>(blockIdx.x))) load_state(seq);
    const int64_t t0 = a.batch.seq_start[seq], t1 = a.batch.seq_start[seq + 1];
    for (int64_t t = t0; t < t1; ++t) {
      // Half 0 stages k, half 1 scale*q: column c of this thread's half.
      const int64_t qk_row = t * a.qk_token_stride + static_cast<int64_t>(kh) * kDim + c;
      kq[tid] = rb == 0 ? a.k[qk_row] : a.scale * a.q[qk_row];
      const int64_t vz_col = static_cast<int64_t>(h) * kDim + c;
      const float v = a.v[t * a.v_token_stride + vz_col];
      const float z = a.z[t * a.z_token_stride + vz_col];
      const int64_t ab = t * a.ab_token_stride + h;
      const float decay = expf(neg_a_exp * softplus(a.a[ab] + dt_bias)); // exp(g)
      const float beta = sigmoid(a.b[ab]);
      __syncthreads();
      const float* k = kq + rb * kRows;
      const float* q = kq + kDim + rb * kRows;
      // S *= decay; this half's rows of S^T k.
      float part = 0.f;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        S[r] *= decay;
        part = fmaf(S[r], k[r], part);
      }
      pred_part[rb * kDim + c] = part;
      __syncthreads();
      // Both halves add the partial sums in the same order, so they agree on u.
      const float u = beta * (v - (pred_part[c] + pred_part[kDim + c]));
      // S += k u^T; this half's rows of S^T (scale q).
      part = 0.f;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        S[r] = fmaf(k[r], u, S[r]);
        part = fmaf(S[r], q[r], part);
      }
      o_part[rb * kDim + c] = part;
      // A verification pass keeps the state after every token (this thread's elements).
      if (a.token_states) {
        float* ts = a.token_states + t * Hv * kDim * kDim + elem;
#pragma unroll
        for (int r = 0; r < kRows; ++r) ts[r * kDim] = S[r];
      }
      __syncthreads();
      const float o = o_part[c] + o_part[kDim + c];
      // Gated RMS norm over the head's 128 columns: each half sums its copy of o^2, half 0 writes.
      const float ss = warp_sum(o * o);
      if (lane == 0) ss_part[warp] = ss;
      __syncthreads();
      if (rb == 0) {
        float total = 0.f;
#pragma unroll
        for (int w = 0; w < kDim / 32; ++w) total += ss_part[w];
        a.out[t * a.out_token_stride + vz_col] = o * rsqrtf(total / kDim + a.eps) * norm_w * silu(z);
      }
      // No barrier before the next token: its writes of kq, pred_part and o_part come after the
      // fourth barrier above, when every thread has read this token's values; a thread rewrites
      // ss_part after the next token's third barrier, which no thread reaches before it has read
      // ss_part here.
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) st[r * kDim] = S[r];
  }
}

} // namespace
} // namespace ninfer::cuda_plugin::gated_deltanet

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::gated_deltanet::kThreads)
    ninfer_gated_delta_step_decode(ninfer_gated_delta_step_args a, int64_t token_begin, int64_t token_end) {
  ninfer::cuda_plugin::gated_deltanet::gated_delta_step_decode(a, token_begin, token_end); // its own launch wait
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin::gated_deltanet {
namespace {

const KernelInfo kKernel = {NINFER_OP_GATED_DELTA_STEP, "decode", "ninfer_gated_delta_step_decode",
                            reinterpret_cast<const void*>(ninfer_gated_delta_step_decode), kThreads};

// dims: v_heads, k_dim, v_dim, k_heads. A CTA walks its sequence's tokens one by one: a
// verification pass (drafts + 1) is a short walk, a prompt chunk is left to the unfused ops,
// whose chunked delta rule runs it in parallel.
constexpr int32_t kMaxSeqTokens = 8;

int32_t supports(const void*, const ninfer_shape* s) {
  return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] == kDim && s->dims[2] == kDim && s->dims[3] > 0 &&
         s->dims[0] % s->dims[3] == 0 && s->max_seq_tokens <= kMaxSeqTokens;
}

size_t dynamic_smem(const void*, const ninfer_shape*) { return kSmemBytes; }

int32_t launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  ninfer_gated_delta_step_args a = *static_cast<const ninfer_gated_delta_step_args*>(args);
  if (int32_t rc = check_head_ratio("gated_delta_step/decode", a.k_heads, a.v_heads, err, err_len); rc != NINFER_OK)
    return rc;
  if (a.k_dim != kDim || a.v_dim != kDim)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                "gated_delta_step/decode: k_dim %d, v_dim %d; this variant computes 128 x 128 heads only", a.k_dim,
                a.v_dim);
  if (a.v_heads > kMaxGridZ) // grid.y has the same limit as grid.z
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                "gated_delta_step/decode: %d value heads exceed the %d CTAs grid.y holds", a.v_heads, kMaxGridZ);
  if (l->dynamic_smem_bytes < kSmemBytes)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                "gated_delta_step/decode: %zu B shared memory planned, %zu needed", l->dynamic_smem_bytes, kSmemBytes);
  if (l->token_end <= l->token_begin || a.batch.num_seqs <= 0) return NINFER_OK;
  int64_t b = l->token_begin, e = l->token_end;
  void* params[] = {&a, &b, &e};
  // The planner sizes grid.x by tokens; a CTA takes whole sequences, so no more are needed.
  const unsigned ctas = static_cast<unsigned>(l->grid_x < a.batch.num_seqs ? l->grid_x : a.batch.num_seqs);
  return launch_kernel(kKernel, dim3(ctas, static_cast<unsigned>(a.v_heads)), l, params, stream, err, err_len);
}

} // namespace

int32_t register_gated_delta_step(const ninfer_registrar* r, char* err, size_t err_len) {
  return register_form<kKernel>(r, 1, 1, {dynamic_smem, supports, launch}, err, err_len);
}

} // namespace ninfer::cuda_plugin::gated_deltanet
#endif // __CUDACC_RTC__
