// causal_conv1d on CUDA (contract: ninfer/abi/ops/causal_conv1d.h).
//
// A CTA takes a tile of kTokensPerCta consecutive tokens of the launch (grid.x, grid-stride)
// and one of kChannelSlices slices of the channels (grid.y, the variant's split_k: channels
// are independent, and slicing them keeps a one-token decode step spread over several SMs).
// Each thread owns channels of its slice and computes every token of the tile for them,
// reading the window straight from x and the slot's state; each x element is read `kernel`
// times, from L1/L2.
//
// The state is what makes this more than a stencil: the first kernel-1 tokens of a sequence
// read the slot's old state, and its last tokens define the new one. So one thread reads and
// writes a sequence's state for a channel: the one owning that channel in the tile that holds
// the sequence's first token. That tile also computes the sequence's first kernel-1 tokens
// when they spill past its end (other tiles skip them) and writes the new state after its
// reads of the old one, in program order. No other CTA touches that state, so a launch needs
// no grid-wide ordering.
#include <cuda_runtime.h>

#include "gated_deltanet/common.cuh"
#include "ninfer/abi/ops/causal_conv1d.h"
#include "common/grid_dependency.cuh"

namespace ninfer::cuda_plugin::gated_deltanet {
namespace {

constexpr int kThreads = 128;
constexpr int kTokensPerCta = 16;
// 80 slices: Qwen3.5-27B's 10,240 conv channels make 128 per CTA, one per thread, so a one-token
// decode step is one round of loads on 80 SMs (8 slices left each thread 10 channels in a row:
// 19 us per layer on the H200). Prefill grids are tiles x 80 CTAs, each thread 16 tokens.
constexpr int kChannelSlices = 80;
constexpr int kMaxKernel = 16; // as the CPU reference

// A token of the tile (or of its spill): where its sequence is, and whether this tile computes it.
struct TokenInfo {
  int32_t first; // the sequence's first token in this call
  int32_t len;   // the sequence's tokens in this call
  int32_t slot;
  int32_t mine;
};

// Tokens a tile looks at: its own plus up to kernel-2 that spill past its end.
__host__ __device__ constexpr int tile_span(int kernel) { return kTokensPerCta + (kernel > 2 ? kernel - 2 : 0); }

#ifndef __CUDACC_RTC__ // host side
size_t smem_bytes(int kernel) { return sizeof(TokenInfo) * static_cast<size_t>(tile_span(kernel)); }
#endif

// Element `idx` of the sequence's window for channel c: the kernel-1 state entries, then its
// inputs.
__device__ __forceinline__ float window(const ninfer_causal_conv1d_args& a, const float* st, int32_t first, int idx,
                                        int hist, int64_t c) {
  return idx < hist ? st[idx] : a.x[static_cast<int64_t>(first + idx - hist) * a.x_token_stride + c];
}

__device__ void conv_tiles(const ninfer_causal_conv1d_args& a, int64_t begin, int64_t end) {
  TokenInfo* info = reinterpret_cast<TokenInfo*>(ninfer_gated_deltanet_smem);
  const int K = a.kernel, hist = K - 1;
  const int64_t C = a.channels;
  const int64_t slice = (C + gridDim.y - 1) / gridDim.y;
  const int64_t c_lo = blockIdx.y * slice;
  const int64_t c_hi = c_lo + slice < C ? c_lo + slice : C;
  const int64_t tiles = (end - begin + kTokensPerCta - 1) / kTokensPerCta;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t tb = begin + tile * kTokensPerCta;
    const int64_t te = tb + kTokensPerCta < end ? tb + kTokensPerCta : end;
    const int64_t spill_end = te + (hist > 1 ? hist - 1 : 0);
    const int span = static_cast<int>((spill_end < end ? spill_end : end) - tb);
    for (int p = threadIdx.x; p < span; p += blockDim.x) {
      const int64_t t = tb + p;
      const int32_t s = a.batch.token_seq[t];
      TokenInfo ti;
      ti.first = a.batch.seq_start[s];
      ti.len = a.batch.seq_start[s + 1] - ti.first;
      ti.slot = a.batch.seq_slot[s];
      const bool reads_state = t - ti.first < hist;
      ti.mine = reads_state ? (ti.first >= tb && ti.first < te) : (t < te);
      info[p] = ti;
    }
    __syncthreads();
    for (int64_t c = c_lo + threadIdx.x; c < c_hi; c += blockDim.x) {
      float w[kMaxKernel];
#pragma unroll
      for (int j = 0; j < kMaxKernel; ++j) w[j] = j < K ? a.weight[c * K + j] : 0.f;
      for (int p = 0; p < span; ++p) {
        const TokenInfo ti = info[p];
        if (!ti.mine) continue;
        const int64_t t = tb + p;
        const int u = static_cast<int>(t - ti.first);
        const float* st = a.state + (static_cast<int64_t>(ti.slot) * C + c) * hist;
        float acc = 0.f;
#pragma unroll
        for (int j = 0; j < kMaxKernel; ++j)
          if (j < K) acc = fmaf(w[j], window(a, st, ti.first, u + j, hist, c), acc);
        a.out[t * a.out_token_stride + c] = acc / (1.f + expf(-acc));
        // Speculative verification: the window after token t (entries u+1 .. u+kernel-1). Tokens
        // whose window still reaches the old state are this tile's, read before it is replaced.
        if (a.token_states) {
          float* ts = a.token_states + (t * C + c) * hist;
          for (int i = 0; i < hist; ++i) ts[i] = window(a, st, ti.first, u + 1 + i, hist, c);
        }
      }
      // New states of the sequences starting in this tile: the last kernel-1 window entries,
      // all read before any is written.
      for (int p = 0; p < te - tb; ++p) {
        const TokenInfo ti = info[p];
        if (tb + p != ti.first) continue;
        float* st = a.state + (static_cast<int64_t>(ti.slot) * C + c) * hist;
        float next[kMaxKernel - 1];
#pragma unroll
        for (int i = 0; i < kMaxKernel - 1; ++i)
          if (i < hist) next[i] = window(a, st, ti.first, ti.len + i, hist, c);
#pragma unroll
        for (int i = 0; i < kMaxKernel - 1; ++i)
          if (i < hist) st[i] = next[i];
      }
    }
    __syncthreads(); // info is rewritten by the next tile
  }
}

} // namespace
} // namespace ninfer::cuda_plugin::gated_deltanet

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::gated_deltanet::kThreads)
    ninfer_causal_conv1d_tiled(ninfer_causal_conv1d_args a, int64_t token_begin, int64_t token_end) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::gated_deltanet::conv_tiles(a, token_begin, token_end);
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin::gated_deltanet {
namespace {

const KernelInfo kKernel = {NINFER_OP_CAUSAL_CONV1D, "tiled", "ninfer_causal_conv1d_tiled",
                            reinterpret_cast<const void*>(ninfer_causal_conv1d_tiled), kThreads};

// Every shape, token states (NINFER_SHAPE_TOKEN_STATES) included.
int32_t supports(const void*, const ninfer_shape* s) {
  return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] >= 1 && s->dims[1] <= kMaxKernel;
}

size_t dynamic_smem(const void*, const ninfer_shape* s) { return smem_bytes(static_cast<int>(s->dims[1])); }

int32_t launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  ninfer_causal_conv1d_args a = *static_cast<const ninfer_causal_conv1d_args*>(args);
  if (a.kernel < 1 || a.kernel > kMaxKernel)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "causal_conv1d/tiled: kernel %d outside [1, %d]", a.kernel,
                kMaxKernel);
  if (l->dynamic_smem_bytes < smem_bytes(a.kernel))
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                "causal_conv1d/tiled: planned for a shorter kernel (%zu B shared memory, kernel %d needs %zu)",
                l->dynamic_smem_bytes, a.kernel, smem_bytes(a.kernel));
  if (a.channels <= 0 || l->token_end <= l->token_begin) return NINFER_OK;
  int64_t b = l->token_begin, e = l->token_end;
  void* params[] = {&a, &b, &e};
  return launch_kernel(kKernel, dim3(l->grid_x, l->grid_y), l, params, stream, err, err_len);
}

} // namespace

int32_t register_causal_conv1d(const ninfer_registrar* r, char* err, size_t err_len) {
  return register_form<kKernel>(r, kTokensPerCta, kChannelSlices, {dynamic_smem, supports, launch}, err, err_len);
}

} // namespace ninfer::cuda_plugin::gated_deltanet
#endif // __CUDACC_RTC__
