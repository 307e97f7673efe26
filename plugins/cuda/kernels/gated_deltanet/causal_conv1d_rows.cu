// causal_conv1d on CUDA for prompts: variant "rows" (contract: ninfer/abi/ops/causal_conv1d.h).
//
// Why a second variant: "tiled" (gated_deltanet/causal_conv1d_tiled.cu) gives each thread one
// channel and reads every window entry with its own 4-byte load, `kernel` loads per output; on the
// H200 a 4096-token prompt of Qwen3.5-27B (10,240 channels, kernel 4) took 375 us per layer,
// against ~80 us to stream x in and out back once. Its shape suits a decode step (one token spread
// over 80 CTAs), so decode keeps it and the schedule tables send prompts here
// (arch/schedules/*.yaml, docs/cuda-gated-deltanet.md).
//
// A work item is (a tile of kTokensPerItem consecutive tokens of the launch, a block of
// kChannelsPerItem channels). Each thread owns kLanes = 4 adjacent channels, one float4, so a
// warp reads 512 contiguous bytes of an x row and writes 512 of an out row; it walks the tile's
// tokens in order, loading kBatch rows before using the first, with the last kernel-1 inputs
// in registers (a sliding window): every input is loaded once, plus kernel-1 rows of halo per
// tile (from L2: the previous tile reads them too). Kernels of 1..4 taps (Qwen3.5: 4) get that
// register window, compiled per kernel size; larger ones (the contract allows 16) re-read the
// window from memory per output, correct but not fast. Rows that are not 16-byte aligned
// (pointer or stride), and the last channels when channels % 4 != 0, take 4-byte accesses.
//
// CTAs stride over the items (grid.x x grid.y of them, item = tile + tiles x channel block),
// so any grid is correct; the planner's grid.y (split_k = kChannelSlices) is the 27B layer's
// channel blocks, one item per CTA there.
//
// State, as in "tiled": the thread owning a channel in the tile that holds a sequence's first
// token is the only one to touch that sequence's state for the channel. It computes the
// sequence's first kernel-1 tokens (the ones that read the old state), also when they spill
// past its tile (other tiles skip them), and afterwards writes the new state, never
// overwriting an old entry it has still to read. No grid-wide ordering, no workspace.
#include <cuda_runtime.h>

#include <cstdint>

#include "gated_deltanet/common.cuh"
#include "common/grid_dependency.cuh"
#include "ninfer/abi/ops/causal_conv1d.h"
#include "common/pointwise_math.cuh"

namespace ninfer::cuda_plugin::gated_deltanet {
namespace conv_rows {

constexpr int kThreads = 128;
constexpr int kLanes = 4; // channels per thread: one float4
constexpr int kChannelsPerItem = kThreads * kLanes;
constexpr int kTokensPerItem = 32;
// Rows in flight per thread before the first is used: 8 x 16 B x 128 threads = 16 KB per CTA.
constexpr int kBatch = 8;
// The 4-tap walk alone needs ~80 registers (8 float4 inputs, 4 float4 taps, 3 float4 of
// window); with the item's bookkeeping ptxas spills below 128 (a cap of 5 CTAs per SM, 96
// registers, spilled). 4 CTAs per SM still keep up to 64 KB of loads in flight per SM, which
// covers the memory latency at full bandwidth (docs/cuda-gated-deltanet.md).
constexpr int kMinBlocksPerSm = 4;
// 20 x 512 = 10,240: Qwen3.5-27B's conv channels, so a 27B prompt is one item per CTA.
constexpr int kChannelSlices = 20;
constexpr int kMaxKernel = 16; // as the CPU reference and "tiled"

// The sequence a token of the item belongs to.
struct SeqInfo {
  int32_t first; // its first token in this call
  int32_t len;   // its tokens in this call
  int32_t slot;
};

#ifndef __CUDACC_RTC__ // host side
size_t smem_bytes() { return sizeof(SeqInfo) * kTokensPerItem; }
#endif

__device__ __forceinline__ float4 zero4() { return make_float4(0.f, 0.f, 0.f, 0.f); }

// The thread's channels at p: `lanes` (1..4) of them exist. V: all 4 exist and p is 16-byte
// aligned, so one 16-byte access.
template <bool V>
__device__ __forceinline__ float4 load4(const float* p, int lanes) {
  if constexpr (V) {
    return *reinterpret_cast<const float4*>(p);
  } else {
    return make_float4(p[0], lanes > 1 ? p[1] : 0.f, lanes > 2 ? p[2] : 0.f, lanes > 3 ? p[3] : 0.f);
  }
}

template <bool V>
__device__ __forceinline__ void store4(float* p, float4 v, int lanes) {
  if constexpr (V) {
    *reinterpret_cast<float4*>(p) = v;
  } else {
    p[0] = v.x;
    if (lanes > 1) p[1] = v.y;
    if (lanes > 2) p[2] = v.z;
    if (lanes > 3) p[3] = v.w;
  }
}

__device__ __forceinline__ float4 fma4(float4 w, float4 x, float4 acc) {
  return make_float4(fmaf(w.x, x.x, acc.x), fmaf(w.y, x.y, acc.y), fmaf(w.z, x.z, acc.z), fmaf(w.w, x.w, acc.w));
}

__device__ __forceinline__ float4 silu4(float4 v) { return make_float4(silu(v.x), silu(v.y), silu(v.z), silu(v.w)); }

// Tap j of the thread's channels (weight [channels, kernel]); 0 for channels that do not exist.
__device__ __forceinline__ float4 tap(const ninfer_causal_conv1d_args& a, int c0, int lanes, int j) {
  const float* w = a.weight + static_cast<int64_t>(c0) * a.kernel + j;
  const int K = a.kernel;
  return make_float4(w[0], lanes > 1 ? w[K] : 0.f, lanes > 2 ? w[2 * K] : 0.f, lanes > 3 ? w[3 * K] : 0.f);
}

// Entry q of sequence s's window for the thread's channels, q counted from the sequence's first
// token: q >= 0 is the input x[first + q]; -hist <= q < 0 is entry hist + q of the slot's old
// state (oldest first). The same q for every thread of the CTA.
template <bool V>
__device__ __forceinline__ float4 window_at(const ninfer_causal_conv1d_args& a, const SeqInfo& s, int q, int hist,
                                            int c0, int lanes) {
  if (q >= 0) return load4<V>(a.x + static_cast<int64_t>(s.first + q) * a.x_token_stride + c0, lanes);
  const float* st = a.state + (static_cast<int64_t>(s.slot) * a.channels + c0) * hist + (hist + q);
  return make_float4(st[0], lanes > 1 ? st[hist] : 0.f, lanes > 2 ? st[2 * hist] : 0.f,
                     lanes > 3 ? st[3 * hist] : 0.f);
}

// Outputs of tokens [from, to) of sequence s (from >= s.first) for a kernel of K = KW taps:
// the window's kernel-1 older inputs stay in registers from one token to the next.
template <int KW, bool V>
__device__ void walk_window(const ninfer_causal_conv1d_args& a, const SeqInfo& s, int from, int to,
                            const float4 (&w)[KW], int c0, int lanes) {
  constexpr int hist = KW - 1;
  float4 win[KW]; // win[hist] is the current token's input
#pragma unroll
  for (int j = 0; j < hist; ++j) win[j] = window_at<V>(a, s, from - s.first - hist + j, hist, c0, lanes);
  // Row pointers advance by one stride per token (one 64-bit add) rather than being formed
  // from the token index, which would keep a 64-bit offset per batch row live.
  const float* xp = a.x + static_cast<int64_t>(from) * a.x_token_stride + c0;
  float* op = a.out + static_cast<int64_t>(from) * a.out_token_stride + c0;
  for (int t0 = from; t0 < to; t0 += kBatch) {
    const int n = to - t0 < kBatch ? to - t0 : kBatch;
    float4 in[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      in[i] = i < n ? load4<V>(xp, lanes) : zero4();
      xp += a.x_token_stride;
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      win[hist] = in[i];
      float4 acc = zero4();
#pragma unroll
      for (int j = 0; j < KW; ++j) acc = fma4(w[j], win[j], acc);
      if (i < n) store4<V>(op, silu4(acc), lanes);
      op += a.out_token_stride;
      // Past `to` the window fills with zeros; it is not used after the walk.
#pragma unroll
      for (int j = 0; j < hist; ++j) win[j] = win[j + 1];
    }
  }
}

// The same outputs for any kernel size: every window entry and tap read from memory per output.
template <bool V>
__device__ void walk_direct(const ninfer_causal_conv1d_args& a, const SeqInfo& s, int from, int to,
                            int c0, int lanes) {
  const int hist = a.kernel - 1;
  for (int t = from; t < to; ++t) {
    const int q0 = t - s.first - hist;
    float4 acc = zero4();
    for (int j = 0; j < a.kernel; ++j)
      acc = fma4(tap(a, c0, lanes, j), window_at<V>(a, s, q0 + j, hist, c0, lanes), acc);
    store4<V>(a.out + static_cast<int64_t>(t) * a.out_token_stride + c0, silu4(acc), lanes);
  }
}

// Sequence s's new state for the thread's channels: the last hist entries of its window, i.e.
// entry k <- window entry len - hist + k: an input for q >= 0, else old state entry k + len
// (a sequence shorter than hist keeps part of the old state, shifted).
//
// With the window in registers (hist <= 3): every entry of the 4 channels is read, then all are
// written: one memory latency.
template <int Hist>
__device__ void write_state_small(const ninfer_causal_conv1d_args& a, const SeqInfo& s, int c0, int lanes) {
  float* st = a.state + (static_cast<int64_t>(s.slot) * a.channels + c0) * Hist;
  float next[kLanes][Hist];
#pragma unroll
  for (int i = 0; i < kLanes; ++i)
#pragma unroll
    for (int k = 0; k < Hist; ++k) {
      const int q = s.len - Hist + k;
      if (i < lanes)
        next[i][k] = q < 0 ? st[i * Hist + Hist + q]
                           : a.x[static_cast<int64_t>(s.first + q) * a.x_token_stride + c0 + i];
    }
#pragma unroll
  for (int i = 0; i < kLanes; ++i)
#pragma unroll
    for (int k = 0; k < Hist; ++k)
      if (i < lanes) st[i * Hist + k] = next[i][k];
}

// Any hist, in place, entry by entry in increasing k: the old entry k + len that entry k takes
// is read before step k + len overwrites it. No buffer (registers), one latency per entry:
// the slow path of kernels above 4 taps.
__device__ void write_state_any(const ninfer_causal_conv1d_args& a, const SeqInfo& s, int hist, int c0, int lanes) {
  for (int i = 0; i < lanes; ++i) {
    float* st = a.state + (static_cast<int64_t>(s.slot) * a.channels + c0 + i) * hist;
    for (int k = 0; k < hist; ++k) {
      const int q = s.len - hist + k;
      st[k] = q < 0 ? st[hist + q] : a.x[static_cast<int64_t>(s.first + q) * a.x_token_stride + c0 + i];
    }
  }
}

// One item's tokens [tb, te) for the thread's channels c0 .. c0 + lanes - 1. KW = 1..4: the
// kernel size, window in registers; KW = 0: any kernel size, window re-read.
template <int KW>
__device__ void conv_item(const ninfer_causal_conv1d_args& a, const SeqInfo* info, int tb, int te, int c0, int lanes,
                          bool vec) {
  const int hist = (KW > 0 ? KW : a.kernel) - 1;
  float4 w[KW > 0 ? KW : 1]; // the taps, once per item
  if constexpr (KW > 0) {
#pragma unroll
    for (int j = 0; j < KW; ++j) w[j] = tap(a, c0, lanes, j);
  }
  for (int t = tb; t < te;) {
    const SeqInfo s = info[t - tb];
    const int seq_end = s.first + s.len;
    const int stop = seq_end < te ? seq_end : te;
    const bool owner = t == s.first; // the sequence starts in this tile: its state is ours
    int from = t, to = stop;
    if (owner) {
      const int reads_state = s.first + hist < seq_end ? s.first + hist : seq_end;
      if (reads_state > to) to = reads_state;
    } else if (s.first + hist > from) {
      from = s.first + hist;
    }
    if (from < to) {
      if constexpr (KW > 0) {
        if (vec) walk_window<KW, true>(a, s, from, to, w, c0, lanes);
        else walk_window<KW, false>(a, s, from, to, w, c0, lanes);
      } else {
        if (vec) walk_direct<true>(a, s, from, to, c0, lanes);
        else walk_direct<false>(a, s, from, to, c0, lanes);
      }
    }
    if (owner) {
      if constexpr (KW > 1) write_state_small<KW - 1>(a, s, c0, lanes);
      else if constexpr (KW == 0) write_state_any(a, s, hist, c0, lanes);
    }
    t = stop;
  }
}

// Every item of the launch for a kernel of KW taps (0: any). One loop per kernel size, so the
// registers of the 4-tap path are not those of the slow one. Token indices are int32: the
// token batch's offsets are (token_batch.h), so a call has fewer than 2^31 tokens.
template <int KW>
__device__ void conv_items(const ninfer_causal_conv1d_args& a, int begin, int end) {
  SeqInfo* info = reinterpret_cast<SeqInfo*>(ninfer_gated_deltanet_smem);
  const int C = a.channels;
  const int tiles = (end - begin + kTokensPerItem - 1) / kTokensPerItem;
  const int64_t items = static_cast<int64_t>(tiles) * ((C + kChannelsPerItem - 1) / kChannelsPerItem);
  const bool aligned = reinterpret_cast<uintptr_t>(a.x) % 16 == 0 && a.x_token_stride % 4 == 0 &&
                       reinterpret_cast<uintptr_t>(a.out) % 16 == 0 && a.out_token_stride % 4 == 0;
  // Consecutive CTAs take consecutive tiles of one channel block: the halo rows a tile reads
  // are the previous tile's last rows, in L2 at the same time.
  for (int64_t item = static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x; item < items;
       item += static_cast<int64_t>(gridDim.x) * gridDim.y) {
    const int tb = begin + static_cast<int>(item % tiles) * kTokensPerItem;
    const int te = end - tb > kTokensPerItem ? tb + kTokensPerItem : end;
    for (int p = threadIdx.x; p < te - tb; p += blockDim.x) {
      const int32_t s = a.batch.token_seq[tb + p];
      const int32_t first = a.batch.seq_start[s];
      info[p] = {first, a.batch.seq_start[s + 1] - first, a.batch.seq_slot[s]};
    }
    __syncthreads();
    const int c0 = static_cast<int>(item / tiles) * kChannelsPerItem + static_cast<int>(threadIdx.x) * kLanes;
    if (c0 < C) {
      const int lanes = C - c0 < kLanes ? C - c0 : kLanes;
      conv_item<KW>(a, info, tb, te, c0, lanes, aligned && lanes == kLanes);
    }
    __syncthreads(); // info is rewritten by the next item
  }
}

__device__ void conv_rows(const ninfer_causal_conv1d_args& a, int begin, int end) {
  switch (a.kernel) {
    case 1: conv_items<1>(a, begin, end); break;
    case 2: conv_items<2>(a, begin, end); break;
    case 3: conv_items<3>(a, begin, end); break;
    case 4: conv_items<4>(a, begin, end); break;
    default: conv_items<0>(a, begin, end); break;
  }
}

} // namespace conv_rows
} // namespace ninfer::cuda_plugin::gated_deltanet

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::gated_deltanet::conv_rows::kThreads,
                                                    ninfer::cuda_plugin::gated_deltanet::conv_rows::kMinBlocksPerSm)
    ninfer_causal_conv1d_rows(ninfer_causal_conv1d_args a, int64_t token_begin, int64_t token_end) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::gated_deltanet::conv_rows::conv_rows(a, static_cast<int>(token_begin), static_cast<int>(token_end));
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin::gated_deltanet {
namespace conv_rows {
namespace {

const KernelInfo kKernel = {NINFER_OP_CAUSAL_CONV1D, "rows", "ninfer_causal_conv1d_rows",
                            reinterpret_cast<const void*>(ninfer_causal_conv1d_rows), kThreads};

// Keeps no state between tokens (NINFER_SHAPE_TOKEN_STATES goes to "tiled").
int32_t supports(const void*, const ninfer_shape* s) {
  return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] >= 1 && s->dims[1] <= kMaxKernel &&
         !(s->flags & NINFER_SHAPE_TOKEN_STATES);
}

size_t dynamic_smem(const void*, const ninfer_shape*) { return smem_bytes(); }

int32_t launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  ninfer_causal_conv1d_args a = *static_cast<const ninfer_causal_conv1d_args*>(args);
  if (a.kernel < 1 || a.kernel > kMaxKernel)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "causal_conv1d/rows: kernel %d outside [1, %d]", a.kernel,
                kMaxKernel);
  if (l->dynamic_smem_bytes < smem_bytes())
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                "causal_conv1d/rows: planned with %zu B shared memory, needs %zu", l->dynamic_smem_bytes,
                smem_bytes());
  if (l->token_end > INT32_MAX)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                "causal_conv1d/rows: token %lld beyond the int32 offsets of a token batch",
                static_cast<long long>(l->token_end));
  if (a.channels <= 0 || l->token_end <= l->token_begin) return NINFER_OK;
  int64_t b = l->token_begin, e = l->token_end;
  void* params[] = {&a, &b, &e};
  return launch_kernel(kKernel, dim3(l->grid_x, l->grid_y), l, params, stream, err, err_len);
}

} // namespace
} // namespace conv_rows

int32_t register_causal_conv1d_rows(const ninfer_registrar* r, char* err, size_t err_len) {
  return register_form<conv_rows::kKernel>(r, conv_rows::kTokensPerItem, conv_rows::kChannelSlices,
                                           {conv_rows::dynamic_smem, conv_rows::supports, conv_rows::launch}, err,
                                           err_len);
}

} // namespace ninfer::cuda_plugin::gated_deltanet
#endif // __CUDACC_RTC__
