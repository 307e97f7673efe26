// conv_l2_norm on CUDA for decode steps and verification passes (contract:
// ninfer/abi/ops/conv_l2_norm.h): the causal conv + SiLU of a Gated DeltaNet layer and the L2
// norm of its q and k heads in one launch, where a step otherwise spends two (causal_conv1d,
// then l2_norm).
//
// A CTA takes one sequence (grid.x strides over the call's sequences inside the launch's
// tokens) and walks its tokens in order (one for a decode step, the drafts and their root for a
// verification pass), for one block of norm_dim channels (grid.y): block h < norm_heads is
// exactly normed head h, so the norm's sum of squares is one CTA reduction and needs nothing
// from other CTAs. The channels after the normed
// heads (Qwen3.5's v) are cut into blocks of the same size, the last one partial, and only
// convolved. Each thread owns channels tid, tid + 128, ... of its block (at most 8: norm_dim
// <= 1024) and keeps their outputs in registers until the norm's scale is known.
//
// The state needs no ordering: the thread owning channel c of a sequence is the only reader and
// writer of state[slot, c, :], and it reads the old entries into registers before writing the
// new ones, token after token. A verification pass also writes the state after every token
// (conv.token_states). Calls with longer sequences (prompts) are not supported: models run
// causal_conv1d + l2_norm for them, whose tiled form keeps a chunk's window in shared memory.
#include <cuda_runtime.h>

#include "gated_deltanet/common.cuh"
#include "common/grid_dependency.cuh"
#include "ninfer/abi/ops/conv_l2_norm.h"
#include "common/pointwise_math.cuh"

namespace ninfer::cuda_plugin::gated_deltanet {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxKernel = 16;   // as causal_conv1d's variants and the CPU reference
constexpr int kMaxNormDim = 1024;
constexpr int kPerThread = kMaxNormDim / kThreads; // channels one thread owns at most

#ifndef __CUDACC_RTC__ // host side
// Dynamic shared memory: one partial sum of squares per warp.
constexpr size_t kSmemBytes = sizeof(float) * kWarps;
#endif

// The convolved, SiLU'd value of channel c for token t of the sequence in `slot`; replaces
// that channel's state by the window's last kernel-1 entries (old entries read first), and
// keeps them as token t's state when the call asks for token states.
__device__ __forceinline__ float conv_channel(const ninfer_causal_conv1d_args& a, int64_t t, int32_t slot,
                                              int64_t c) {
  const int K = a.kernel, hist = K - 1;
  float* st = a.state + (static_cast<int64_t>(slot) * a.channels + c) * hist;
  const float x = a.x[t * a.x_token_stride + c];
  float win[kMaxKernel];
#pragma unroll
  for (int j = 0; j < kMaxKernel - 1; ++j) win[j] = j < hist ? st[j] : 0.f;
  float acc = 0.f;
#pragma unroll
  for (int j = 0; j < kMaxKernel; ++j)
    if (j < K) acc = fmaf(a.weight[c * K + j], j < hist ? win[j] : x, acc);
  // New state: window entries 1 .. kernel-1, i.e. the old entries shifted by one, then x.
  float* ts = a.token_states ? a.token_states + (t * a.channels + c) * hist : nullptr;
#pragma unroll
  for (int j = 0; j < kMaxKernel - 1; ++j)
    if (j < hist) {
      const float e = j + 1 < hist ? win[j + 1] : x;
      st[j] = e;
      if (ts) ts[j] = e;
    }
  return silu(acc);
}

__device__ void conv_l2_norm_decode(const ninfer_conv_l2_norm_args& a, int64_t begin, int64_t end) {
  float* red = reinterpret_cast<float*>(ninfer_gated_deltanet_smem);
  const ninfer_causal_conv1d_args& cv = a.conv;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * a.norm_dim;
  const int64_t c_end = c0 + a.norm_dim < cv.channels ? c0 + a.norm_dim : cv.channels;
  const bool normed = static_cast<int>(blockIdx.y) < a.norm_heads; // uniform over the CTA
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int seq = blockIdx.x; seq < cv.batch.num_seqs; seq += gridDim.x) {
    const int64_t t0 = cv.batch.seq_start[seq], t1 = cv.batch.seq_start[seq + 1];
    if (t0 < begin || t1 > end) continue; // whole CTA alike
    const int32_t slot = cv.batch.seq_slot[seq];
    for (int64_t t = t0; t < t1; ++t) {
      float* out = cv.out + t * cv.out_token_stride;
      float y[kPerThread];
      float ss = 0.f;
#pragma unroll
      for (int u = 0; u < kPerThread; ++u) {
        const int64_t c = c0 + threadIdx.x + u * kThreads;
        y[u] = c < c_end ? conv_channel(cv, t, slot, c) : 0.f;
        ss = fmaf(y[u], y[u], ss);
      }
      float scale = 1.f;
      if (normed) {
        ss = warp_sum(ss);
        if (lane == 0) red[warp] = ss;
        __syncthreads();
        float total = 0.f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) total += red[w];
        scale = rsqrtf(total + a.eps);
        __syncthreads(); // red is rewritten for the next token
      }
#pragma unroll
      for (int u = 0; u < kPerThread; ++u) {
        const int64_t c = c0 + threadIdx.x + u * kThreads;
        if (c < c_end) out[c] = y[u] * scale;
      }
    }
  }
}

} // namespace
} // namespace ninfer::cuda_plugin::gated_deltanet

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::gated_deltanet::kThreads)
    ninfer_conv_l2_norm_decode(ninfer_conv_l2_norm_args a, int64_t token_begin, int64_t token_end) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::gated_deltanet::conv_l2_norm_decode(a, token_begin, token_end);
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin::gated_deltanet {
namespace {

const KernelInfo kKernel = {NINFER_OP_CONV_L2_NORM, "decode", "ninfer_conv_l2_norm_decode",
                            reinterpret_cast<const void*>(ninfer_conv_l2_norm_decode), kThreads};

// Decode steps and verification passes: dims[2], the longest sequence of the call, is a short
// walk (token states or not); prompt chunks run causal_conv1d and l2_norm.
constexpr int32_t kMaxSeqTokens = 8;

int32_t supports(const void*, const ninfer_shape* s) {
  return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] >= 1 && s->dims[1] <= kMaxKernel && s->dims[2] >= 1 &&
         s->dims[2] <= kMaxSeqTokens && s->dims[3] >= 1 && s->dims[3] <= kMaxNormDim;
}

size_t dynamic_smem(const void*, const ninfer_shape*) { return kSmemBytes; }

int32_t launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  ninfer_conv_l2_norm_args a = *static_cast<const ninfer_conv_l2_norm_args*>(args);
  const ninfer_causal_conv1d_args& cv = a.conv;
  if (cv.kernel < 1 || cv.kernel > kMaxKernel)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "conv_l2_norm/decode: kernel %d outside [1, %d]",
                cv.kernel, kMaxKernel);
  if (a.norm_dim < 1 || a.norm_dim > kMaxNormDim)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "conv_l2_norm/decode: norm_dim %d outside [1, %d]",
                a.norm_dim, kMaxNormDim);
  if (a.norm_heads < 0 || static_cast<int64_t>(a.norm_heads) * a.norm_dim > cv.channels)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                "conv_l2_norm/decode: %d normed heads of %d exceed the %d channels", a.norm_heads, a.norm_dim,
                cv.channels);
  if (l->dynamic_smem_bytes < kSmemBytes)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                "conv_l2_norm/decode: %zu B shared memory planned, %zu needed", l->dynamic_smem_bytes, kSmemBytes);
  if (cv.channels <= 0 || l->token_end <= l->token_begin) return NINFER_OK;
  const int64_t blocks = (static_cast<int64_t>(cv.channels) + a.norm_dim - 1) / a.norm_dim;
  if (blocks > kMaxGridZ) // grid.y has the same limit as grid.z
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                "conv_l2_norm/decode: %d channels in blocks of %d exceed the %d CTAs grid.y holds", cv.channels,
                a.norm_dim, kMaxGridZ);
  if (cv.batch.num_seqs <= 0) return NINFER_OK;
  int64_t b = l->token_begin, e = l->token_end;
  void* params[] = {&a, &b, &e};
  // The planner sizes grid.x by tokens; a CTA takes whole sequences, so no more are needed.
  const unsigned ctas = static_cast<unsigned>(l->grid_x < cv.batch.num_seqs ? l->grid_x : cv.batch.num_seqs);
  return launch_kernel(kKernel, dim3(ctas, static_cast<unsigned>(blocks)), l, params, stream, err, err_len);
}

} // namespace

int32_t register_conv_l2_norm(const ninfer_registrar* r, char* err, size_t err_len) {
  return register_form<kKernel>(r, 1, 1, {dynamic_smem, supports, launch}, err, err_len);
}

} // namespace ninfer::cuda_plugin::gated_deltanet
#endif // __CUDACC_RTC__
