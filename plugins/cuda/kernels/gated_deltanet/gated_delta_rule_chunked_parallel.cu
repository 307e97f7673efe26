// gated_delta_rule, chunk-parallel form on CUDA (contract: ninfer/abi/ops/gated_delta_rule.h),
// variant "chunked64_parallel". Used for prefill; the same algebra as chunked64
// (gated_deltanet/gated_delta_rule_chunked.cu, whose header derives it), organised so that only the
// part that carries the state runs chunk after chunk. For a chunk of n <= 64 tokens, G the
// cumulative log decay from the chunk start, S the state before the chunk, q already times `scale`:
//   A   = strictly lower, A_ij = beta_i e^{G_i - G_j} (k_i . k_j);   T = (I + A)^{-1}
//   W   = T diag(beta e^G) K,   U0 = T diag(beta) V                 (no S: any chunk, any time)
//   U   = U0 - W S                                                   (the chunk's delta rows)
//   out = diag(e^G) Q S + M U,  M_ij = e^{G_i - G_j} (q_i . k_j) for j <= i
//   S'  = e^{G_n} S + K^T diag(e^{G_n - G}) U
// Four kernels on the caller's stream, intermediates in the caller's workspace:
//   0. chunk table (1 CTA): the (first token, length) of every 64-token chunk of every
//      sequence in the launch's token range, so the parallel phases index chunks directly;
//   1. prepare, one CTA per (chunk, value head), all at once: G (kept for phases 2-3), A, T by
//      a blocked inverse (invert_unit_lower), then W and U0 (kept);
//   2. carry, one CTA per (sequence, value head, 32 value columns), chunk after chunk: the
//      chunk's W, q and k tiles stream into shared memory with cp.async one step ahead (they
//      do not depend on the state); per chunk U = U0 - W S (kept, over U0), the inter-chunk
//      half of out (diag(e^G) Q S, written to out), then S' (in registers, copied to shared
//      memory for the next chunk's row products). Three 64 x k_dim x 32 products per chunk,
//      nothing else on the sequential path; the state is read from its slot once and
//      written back once;
//   3. outputs, one CTA per (chunk, value head), all at once: M from Q K^T, out += M U.
// Everything in float32 (the contract's tests hold every CUDA form to the same tolerance
// against the double-precision CPU reference). Tensor cores (3xTF32 or split bf16) for the
// 64-wide products are the next step; docs/cuda-gated-deltanet.md has the numbers.
//
// Limits: k_dim and v_dim up to 128 (the register and shared-memory tiles are sized for it;
// chunked64 takes larger heads). Workspace: see Workspace below, about
// tokens x v_heads x (k_dim + v_dim + 1) floats.
#include <cuda_runtime.h>

#include "gated_deltanet/common.cuh"
#include "gated_deltanet/gated_delta_rule_parallel_tiles.cuh"
#include "common/grid_dependency.cuh"
#include "ninfer/abi/ops/gated_delta_rule.h"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include <algorithm>
#endif

namespace ninfer::cuda_plugin::gated_deltanet::parallel {
namespace {

constexpr int kMaxDim = 128;
constexpr int kThreads = 256;      // table, prepare and outputs kernels
constexpr int kCarryThreads = 256; // carry kernel
constexpr int kCarryCols = 32;     // value columns per carry CTA
constexpr int kMPitch = kChunk + 4;

// Shared memory of the prepare kernel, in floats. One staging tile X (k, then beta v) wide
// enough for both head dims, rounded to whole 64-column passes of the tile products; its
// pitch is 4 mod 32 (gram_4x4's bank pattern).
struct PrepareLayout {
  int pitch, fill;
  int X, A, T, P, G, B, EG, total;
  __host__ __device__ PrepareLayout(int K, int V) {
    fill = round_up(K > V ? K : V, 64);
    pitch = fill + 4;
    X = 0;
    A = X + kChunk * pitch;
    T = A + kChunk * kAPitch;
    P = T + kChunk * kTPitch;
    G = P + kPFloats;
    B = G + kChunk;
    EG = B + kChunk;
    total = EG + kChunk;
  }
};

// Shared memory of the outputs kernel: q tile, k tile (then the U tile), M.
struct OutputsLayout {
  int pitch, fill;
  int Xq, Xk, M, G, total;
  __host__ __device__ OutputsLayout(int K, int V) {
    fill = round_up(K > V ? K : V, 64);
    pitch = fill + 4;
    Xq = 0;
    Xk = Xq + kChunk * pitch;
    M = Xk + kChunk * pitch;
    G = M + kChunk * kMPitch;
    total = G + kChunk;
  }
};

// Shared memory of the carry kernel: two tile buffers (the chunks' W, q and k tiles stream
// through them in that order, the next one loading while the current one is used), the state
// slice [kMaxDim][32], and per chunk parity the U rows [64][32] and G. About 99 KiB for
// 128-wide heads: two CTAs per SM.
struct CarryLayout {
  int kc, pitch;
  int tiles, S, U, G, total;
  __host__ __device__ explicit CarryLayout(int K) {
    kc = round_up(K, 4);
    pitch = round_up(kc, 32) + 4; // 4 mod 32: the rows a warp reads hit distinct banks
    tiles = 0;
    S = tiles + 2 * kChunk * pitch;
    U = S + kMaxDim * kCarryCols;
    G = U + 2 * kChunk * kCarryCols;
    total = G + 2 * kChunk;
  }
};

#ifndef __CUDACC_RTC__ // host side
size_t prepare_smem(int K, int V) { return sizeof(float) * PrepareLayout(K, V).total; }
size_t outputs_smem(int K, int V) { return sizeof(float) * OutputsLayout(K, V).total; }
size_t carry_smem(int K) { return sizeof(float) * CarryLayout(K).total; }
size_t max_smem(int K, int V) { return std::max({prepare_smem(K, V), outputs_smem(K, V), carry_smem(K)}); }
#endif

#ifndef __CUDACC_RTC__ // host side
// Caller's workspace, rows indexed by (token - token_begin): the chunk table, then per token
// and value head G, W (k_dim wide) and U (v_dim wide; U0 until the carry kernel replaces it).
struct Workspace {
  int2* table = nullptr;
  float *G = nullptr, *W = nullptr, *U = nullptr;
  size_t bytes = 0;
  Workspace(void* base, int64_t tokens, int64_t Hv, int64_t K, int64_t V) {
    auto* p = static_cast<char*>(base);
    auto take = [&](size_t n) {
      const size_t at = bytes;
      bytes = (bytes + n + 255) / 256 * 256;
      return p ? p + at : nullptr;
    };
    table = reinterpret_cast<int2*>(take(sizeof(int2) * tokens));
    G = reinterpret_cast<float*>(take(sizeof(float) * tokens * Hv));
    W = reinterpret_cast<float*>(take(sizeof(float) * tokens * Hv * K));
    U = reinterpret_cast<float*>(take(sizeof(float) * tokens * Hv * V));
  }
};

// Upper bound on the chunks of a launch covering `range` tokens in `seqs` sequences: each has
// at least one token, and sum ceil(len / 64) < range / 64 + seqs.
int64_t chunk_bound(int64_t range, int64_t seqs) { return std::min(range, (range + kChunk - 1) / kChunk + seqs); }
#endif

// Rows ri and ri + 32 of a tile times the carry kernel's state slice [kc][32]: acc[a][e] =
// sum_d tile[ri + 32a][d] * S[d][4cg + e]. The 4 tile rows a warp reads sit in distinct
// banks (pitch 4 mod 32); a state row is one 128-byte read shared by the warp's 4 rows.
__device__ inline void rows_times_state(const float* tile, int pitch, const float* S, int kc, int ri, int cg,
                                        float (&acc)[2][4]) {
#pragma unroll
  for (int a = 0; a < 2; ++a)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[a][e] = 0.f;
#pragma unroll 2
  for (int d = 0; d < kc; d += 4) {
    const float4 x[2] = {load4(tile + ri * pitch + d), load4(tile + (ri + 32) * pitch + d)};
    const float4 s0 = load4(S + (d + 0) * kCarryCols + 4 * cg), s1 = load4(S + (d + 1) * kCarryCols + 4 * cg);
    const float4 s2 = load4(S + (d + 2) * kCarryCols + 4 * cg), s3 = load4(S + (d + 3) * kCarryCols + 4 * cg);
#pragma unroll
    for (int a = 0; a < 2; ++a) {
      acc[a][0] = dot4(x[a], make_float4(s0.x, s1.x, s2.x, s3.x), acc[a][0]);
      acc[a][1] = dot4(x[a], make_float4(s0.y, s1.y, s2.y, s3.y), acc[a][1]);
      acc[a][2] = dot4(x[a], make_float4(s0.z, s1.z, s2.z, s3.z), acc[a][2]);
      acc[a][3] = dot4(x[a], make_float4(s0.w, s1.w, s2.w, s3.w), acc[a][3]);
    }
  }
}

// Asynchronous global -> shared copies (cp.async, sm_80+). valid == false copies nothing and
// zero-fills the destination (src must still be a mapped address).
__device__ inline void copy_async16(float* dst, const float* src, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(__cvta_generic_to_global(src)),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ inline void copy_async4(float* dst, const float* src, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(__cvta_generic_to_global(src)),
               "r"(valid ? 4 : 0)
               : "memory");
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits for all but the most recently committed group of this thread.
__device__ inline void cp_async_wait_prior() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }
__device__ inline void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// Like stage_rows, asynchronously: tile[i][d] = src[i * row_stride + d] for i < n, d < valid,
// zero for the other rows i < 64 and columns d < fill (a multiple of 4). vec: 16-byte copies,
// for src and row_stride 16-byte aligned and valid a multiple of 4. All threads take part;
// the caller commits and waits.
__device__ inline void stage_async(float* tile, int pitch, const float* src, int64_t row_stride, int n, int valid,
                                   int fill, bool vec) {
  if (vec) {
    const int per = fill >> 2;
    for (int idx = threadIdx.x; idx < kChunk * per; idx += blockDim.x) {
      const int i = idx / per, d = 4 * (idx - i * per);
      const bool ok = i < n && d < valid;
      copy_async16(tile + i * pitch + d, ok ? src + i * row_stride + d : src, ok);
    }
  } else {
    for (int idx = threadIdx.x; idx < kChunk * fill; idx += blockDim.x) {
      const int i = idx / fill, d = idx - i * fill;
      const bool ok = i < n && d < valid;
      copy_async4(tile + i * pitch + d, ok ? src + i * row_stride + d : src, ok);
    }
  }
}

} // namespace
} // namespace ninfer::cuda_plugin::gated_deltanet::parallel

using namespace ninfer::cuda_plugin::gated_deltanet::parallel;

// ---- 0. chunk table ------------------------------------------------------------------------
// table[q] = (first token, tokens) of the launch's q-th chunk, sequences in batch order, then
// (0, 0) up to `bound` so the parallel phases' surplus CTAs see an empty chunk.
extern "C" __global__ void __launch_bounds__(kThreads)
    ninfer_gdr_parallel_chunk_table(ninfer_token_batch batch, int64_t begin, int64_t end, int2* table, int bound) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  __shared__ int warp_sums[kThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int running = 0;
  for (int base = 0; base < batch.num_seqs; base += kThreads) {
    const int s = base + static_cast<int>(threadIdx.x);
    int t0 = 0, t1 = 0, nc = 0;
    if (s < batch.num_seqs) {
      t0 = batch.seq_start[s];
      t1 = batch.seq_start[s + 1];
      if (t0 >= begin && t1 <= end && t0 < t1) nc = (t1 - t0 + kChunk - 1) / kChunk;
    }
    int incl = nc; // inclusive scan of the chunk counts over the block
    for (int off = 1; off < 32; off <<= 1) {
      const int y = __shfl_up_sync(kFullWarp, incl, off);
      if (lane >= off) incl += y;
    }
    if (lane == 31) warp_sums[warp] = incl;
    __syncthreads();
    int before = 0, total = 0;
    for (int w = 0; w < kThreads / 32; ++w) {
      if (w < warp) before += warp_sums[w];
      total += warp_sums[w];
    }
    const int first = running + before + incl - nc;
    for (int c = 0; c < nc; ++c) {
      const int c0 = t0 + c * kChunk;
      if (first + c < bound) table[first + c] = make_int2(c0, min(kChunk, t1 - c0));
    }
    running += total;
    __syncthreads(); // warp_sums is rewritten by the next round
  }
  for (int q = running + static_cast<int>(threadIdx.x); q < bound; q += kThreads) table[q] = make_int2(0, 0);
}

// ---- 1. prepare: G, A, T, W, U0 of every chunk -----------------------------------------------
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    ninfer_gdr_parallel_prepare(ninfer_gated_delta_rule_args a, int64_t begin, const int2* table, float* Gw,
                                float* Ww, float* Uw) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  const int2 chunk = table[blockIdx.x];
  const int c0 = chunk.x, n = chunk.y;
  if (n <= 0) return; // whole CTA alike
  const int K = a.k_dim, V = a.v_dim, Hv = a.v_heads, h = blockIdx.y;
  const int kh = h / (Hv / a.k_heads);
  const int kc = round_up(K, 4), vc = round_up(V, 4);
  const PrepareLayout L(K, V);
  float* sm = reinterpret_cast<float*>(ninfer_gated_deltanet_smem);
  float *X = sm + L.X, *A = sm + L.A, *T = sm + L.T, *P = sm + L.P, *G = sm + L.G, *B = sm + L.B, *EG = sm + L.EG;
  const int64_t row0 = c0 - begin; // workspace row of the chunk's first token

  stage_rows(X, L.pitch, a.k + static_cast<int64_t>(c0) * a.qk_token_stride + static_cast<int64_t>(kh) * K,
             a.qk_token_stride, n, K, L.fill);
  ninfer::cuda_plugin::gated_deltanet::scan_decay(a.g + static_cast<int64_t>(c0) * Hv + h, a.beta + static_cast<int64_t>(c0) * Hv + h, Hv, n, G, B);
  for (int idx = threadIdx.x; idx < kChunk * kChunk; idx += kThreads) {
    const int i = idx / kChunk, j = idx - i * kChunk;
    T[i * kTPitch + j] = i == j ? 1.f : 0.f;
  }
  __syncthreads();
  if (threadIdx.x < kChunk) {
    const int i = threadIdx.x;
    EG[i] = B[i] * expf(G[i]);
    if (i < n) Gw[(row0 + i) * Hv + h] = G[i];
  }

  // A from K K^T: thread (r, c) holds rows r + 16a, columns c + 16b.
  const int r = threadIdx.x >> 4, c = threadIdx.x & 15;
  {
    float kk[4][4];
    gram_4x4(X, X, L.pitch, kc, r, c, kk);
#pragma unroll
    for (int ai = 0; ai < 4; ++ai) {
      const int i = r + 16 * ai;
#pragma unroll
      for (int bj = 0; bj < 4; ++bj) {
        const int j = c + 16 * bj;
        A[i * kAPitch + j] = j < i ? B[i] * expf(G[i] - G[j]) * kk[ai][bj] : 0.f;
      }
    }
  }
  __syncthreads(); // A complete, EG visible, every read of the raw k rows done

  // X rows become beta_j e^{G_j} k_j (for W); the inverse does not touch X.
  for (int idx = threadIdx.x; idx < kChunk * kc; idx += kThreads) {
    const int i = idx / kc, d = idx - i * kc;
    X[i * L.pitch + d] *= EG[i];
  }
  invert_unit_lower(A, T, P); // ends with a barrier: T and the scaled X are complete

  // W = T diag(beta e^G) K, rows 4r..4r+3 and columns d0 + 4c..+3 per thread.
  lower_times_to_rows<false>(T, kTPitch, X, L.pitch, r, c, n, kc, K,
                            [&](int i) { return Ww + ((row0 + i) * Hv + h) * K; });
  __syncthreads(); // every read of X done before it takes the v rows

  stage_rows(X, L.pitch, a.v + static_cast<int64_t>(c0) * a.v_token_stride + static_cast<int64_t>(h) * V,
             a.v_token_stride, n, V, L.fill, B);
  __syncthreads();

  // U0 = T diag(beta) V.
  lower_times_to_rows<false>(T, kTPitch, X, L.pitch, r, c, n, vc, V,
                            [&](int i) { return Uw + ((row0 + i) * Hv + h) * V; });
}

// ---- 2. carry: the state across chunks --------------------------------------------------------
// One CTA of 256 threads per (sequence, value head, 32 value columns). A chunk's three tiles
// (W, q, k rows; none depends on the state) stream through two shared buffers with cp.async:
// tile t + 1 (and with a W tile its chunk's U0 rows and G) loads while tile t is used, so the
// sequential path is the three products and their barriers. Thread roles, columns 4cg..4cg+3
// throughout:
//   W tile: U = U0 - W S (kept, over U0)                 rows ri and ri + 32
//   q tile: out = scale e^{G_i} q_i S, then U rows times e^{G_n - G_i} (same elements)
//   k tile: S' = e^{G_n} S + K^T U                       state rows 4ri..4ri+3
// The thread's 16 state elements stay in registers from chunk to chunk; the shared slice is
// their copy for the row products (written by the same thread, read after a barrier).
extern "C" __global__ void __launch_bounds__(kCarryThreads, 2)
    ninfer_gdr_parallel_carry(ninfer_gated_delta_rule_args a, int64_t begin, int64_t end, const float* Gw,
                              const float* Ww, float* Uw) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  const int K = a.k_dim, V = a.v_dim, Hv = a.v_heads;
  const CarryLayout L(K);
  const int kc = L.kc, pitch = L.pitch;
  float* sm = reinterpret_cast<float*>(ninfer_gated_deltanet_smem);
  float *tiles = sm + L.tiles, *S = sm + L.S, *Ubuf = sm + L.U, *Gbuf = sm + L.G;
  const int vblocks = (V + kCarryCols - 1) / kCarryCols;
  const int h = blockIdx.y / vblocks, v0 = (blockIdx.y % vblocks) * kCarryCols;
  const int vcols = min(kCarryCols, V - v0); // value columns of this CTA that exist
  const int kh = h / (Hv / a.k_heads);
  const int tid = threadIdx.x;
  const int cg = tid & 7, ri = tid >> 3;
  const bool own_rows = 4 * ri < kc; // state rows 4ri..4ri+3 are staged columns of the k tile
  // 16-byte copies where every row start of the source is 16-byte aligned, else 4-byte ones.
  const bool vec_qk = K % 4 == 0 && a.qk_token_stride % 4 == 0 && (reinterpret_cast<uintptr_t>(a.q) & 15) == 0 &&
                      (reinterpret_cast<uintptr_t>(a.k) & 15) == 0;
  const bool vec_ws = K % 4 == 0 && V % 4 == 0 && (reinterpret_cast<uintptr_t>(Ww) & 15) == 0 &&
                      (reinterpret_cast<uintptr_t>(Uw) & 15) == 0; // W, U: 256-byte aligned arrays
  const int64_t qk_head = static_cast<int64_t>(kh) * K;

  for (int seq = blockIdx.x; seq < a.batch.num_seqs; seq += gridDim.x) {
    const int t0 = a.batch.seq_start[seq], t1 = a.batch.seq_start[seq + 1];
    if (t0 < begin || t1 > end || t0 >= t1) continue; // whole CTA alike
    float* st = a.state + (static_cast<int64_t>(a.batch.seq_slot[seq]) * Hv + h) * K * V;

    // Tile t of the sequence: chunk t / 3, its W, q or k rows; with W also U0 and G.
    auto issue = [&](int t) {
      const int c = t / 3, p = t - 3 * c;
      const int c0 = t0 + c * kChunk, n = min(kChunk, t1 - c0);
      const int64_t row0 = c0 - begin;
      float* tile = tiles + (t & 1) * kChunk * pitch;
      if (p == 0) {
        stage_async(tile, pitch, Ww + (row0 * Hv + h) * K, static_cast<int64_t>(Hv) * K, n, K, kc, vec_ws);
        stage_async(Ubuf + (c & 1) * kChunk * kCarryCols, kCarryCols, Uw + (row0 * Hv + h) * V + v0,
                    static_cast<int64_t>(Hv) * V, n, vcols, kCarryCols, vec_ws);
        if (tid < kChunk) copy_async4(Gbuf + (c & 1) * kChunk + tid, Gw + (row0 + min(tid, n - 1)) * Hv + h, true);
      } else {
        const float* src = (p == 1 ? a.q : a.k) + static_cast<int64_t>(c0) * a.qk_token_stride + qk_head;
        stage_async(tile, pitch, src, a.qk_token_stride, n, K, kc, vec_qk);
      }
    };

    // The state slice: registers (rows 4ri.., columns 4cg..) and their shared copy. The
    // previous sequence's readers of S passed the loop's last barrier; writers are this thread.
    float sreg[4][4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int d = 4 * ri + e;
#pragma unroll
      for (int f = 0; f < 4; ++f) {
        const int col = 4 * cg + f;
        sreg[e][f] = d < K && col < vcols ? st[static_cast<int64_t>(d) * V + v0 + col] : 0.f;
      }
      *reinterpret_cast<float4*>(S + d * kCarryCols + 4 * cg) =
          make_float4(sreg[e][0], sreg[e][1], sreg[e][2], sreg[e][3]);
    }

    const int ntiles = 3 * ((t1 - t0 + kChunk - 1) / kChunk);
    issue(0);
    cp_async_commit();
    for (int t = 0; t < ntiles; ++t) {
      // Buffer (t + 1) & 1 held tile t - 1, and U/G parity of chunk (t + 1) / 3 held chunk
      // (t + 1) / 3 - 2: all their reads ended before the previous iteration's last barrier.
      if (t + 1 < ntiles) issue(t + 1);
      cp_async_commit();
      cp_async_wait_prior(); // this thread's copies of tile t (and U0, G) landed
      __syncthreads();       // everyone's, and S' of the previous chunk is complete
      const int c = t / 3, p = t - 3 * c;
      const int c0 = t0 + c * kChunk, n = min(kChunk, t1 - c0);
      const int64_t row0 = c0 - begin;
      const float* tile = tiles + (t & 1) * kChunk * pitch;
      float* Us = Ubuf + (c & 1) * kChunk * kCarryCols;
      const float* G = Gbuf + (c & 1) * kChunk; // past n: G_{n-1}
      if (p < 2) {
        float acc[2][4];
        rows_times_state(tile, pitch, S, kc, ri, cg, acc);
#pragma unroll
        for (int ai = 0; ai < 2; ++ai) {
          const int i = ri + 32 * ai;
          float4* up = reinterpret_cast<float4*>(Us + i * kCarryCols + 4 * cg);
          float4 u = *up;
          float r[4];
          if (p == 0) { // U = U0 - W S, kept for the outputs kernel
            u = make_float4(u.x - acc[ai][0], u.y - acc[ai][1], u.z - acc[ai][2], u.w - acc[ai][3]);
            r[0] = u.x, r[1] = u.y, r[2] = u.z, r[3] = u.w;
            if (i < n) {
              float* dst = Uw + ((row0 + i) * Hv + h) * V + v0 + 4 * cg;
#pragma unroll
              for (int f = 0; f < 4; ++f)
                if (4 * cg + f < vcols) dst[f] = r[f];
            }
          } else { // the inter-chunk half of out; U rows take the update's factor
            const float e_i = a.scale * expf(G[i]), back = expf(G[kChunk - 1] - G[i]);
            if (i < n) {
              float* dst = a.out + static_cast<int64_t>(c0 + i) * a.out_token_stride + static_cast<int64_t>(h) * V + v0 +
                           4 * cg;
#pragma unroll
              for (int f = 0; f < 4; ++f)
                if (4 * cg + f < vcols) dst[f] = e_i * acc[ai][f];
            }
            u = make_float4(u.x * back, u.y * back, u.z * back, u.w * back);
          }
          *up = u;
        }
      } else if (own_rows) { // S' = e^{G_n} S + sum_j k_j u_j^T (u already scaled)
        const float e_last = expf(G[kChunk - 1]);
#pragma unroll
        for (int e = 0; e < 4; ++e)
#pragma unroll
          for (int f = 0; f < 4; ++f) sreg[e][f] *= e_last;
#pragma unroll 8
        for (int j = 0; j < kChunk; ++j) { // rows past n: zero k and zero U
          const float4 kv = load4(tile + j * pitch + 4 * ri);
          const float4 u = load4(Us + j * kCarryCols + 4 * cg);
          const float kr[4] = {kv.x, kv.y, kv.z, kv.w}, ur[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
          for (int e = 0; e < 4; ++e)
#pragma unroll
            for (int f = 0; f < 4; ++f) sreg[e][f] = fmaf(kr[e], ur[f], sreg[e][f]);
        }
#pragma unroll
        for (int e = 0; e < 4; ++e)
          *reinterpret_cast<float4*>(S + (4 * ri + e) * kCarryCols + 4 * cg) =
              make_float4(sreg[e][0], sreg[e][1], sreg[e][2], sreg[e][3]);
      }
      __syncthreads(); // every read of tile t, of Us (by the k product) and of S done
    }
    cp_async_wait_all(); // only empty groups can be pending here
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int d = 4 * ri + e;
#pragma unroll
      for (int f = 0; f < 4; ++f) {
        const int col = 4 * cg + f;
        if (d < K && col < vcols) st[static_cast<int64_t>(d) * V + v0 + col] = sreg[e][f];
      }
    }
  }
}

// ---- 3. outputs: the intra-chunk half ---------------------------------------------------------
// The variant's described kernel (its resources are what the planner sees, with the largest
// shared-memory need of the four, the carry kernel's for Qwen3.5's 128-wide heads).
extern "C" __global__ void __launch_bounds__(kThreads, 2)
    ninfer_gated_delta_rule_chunked64_parallel(ninfer_gated_delta_rule_args a, int64_t begin, const int2* table,
                                               const float* Gw, const float* Uw) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  const int2 chunk = table[blockIdx.x];
  const int c0 = chunk.x, n = chunk.y;
  if (n <= 0) return; // whole CTA alike
  const int K = a.k_dim, V = a.v_dim, Hv = a.v_heads, h = blockIdx.y;
  const int kh = h / (Hv / a.k_heads);
  const int kc = round_up(K, 4), vc = round_up(V, 4);
  const OutputsLayout L(K, V);
  float* sm = reinterpret_cast<float*>(ninfer_gated_deltanet_smem);
  float *Xq = sm + L.Xq, *Xk = sm + L.Xk, *M = sm + L.M, *G = sm + L.G;
  const int64_t row0 = c0 - begin;
  const int64_t qk0 = static_cast<int64_t>(c0) * a.qk_token_stride + static_cast<int64_t>(kh) * K;

  stage_rows(Xq, L.pitch, a.q + qk0, a.qk_token_stride, n, K, kc);
  stage_rows(Xk, L.pitch, a.k + qk0, a.qk_token_stride, n, K, kc);
  if (threadIdx.x < kChunk) G[threadIdx.x] = Gw[(row0 + min(static_cast<int>(threadIdx.x), n - 1)) * Hv + h];
  __syncthreads();

  const int r = threadIdx.x >> 4, c = threadIdx.x & 15;
  {
    float qk[4][4];
    gram_4x4(Xq, Xk, L.pitch, kc, r, c, qk);
#pragma unroll
    for (int ai = 0; ai < 4; ++ai) {
      const int i = r + 16 * ai;
#pragma unroll
      for (int bj = 0; bj < 4; ++bj) {
        const int j = c + 16 * bj;
        M[i * kMPitch + j] = j <= i ? a.scale * expf(G[i] - G[j]) * qk[ai][bj] : 0.f;
      }
    }
  }
  __syncthreads(); // M complete, every read of the k tile done

  stage_rows(Xk, L.pitch, Uw + row0 * Hv * V + static_cast<int64_t>(h) * V, static_cast<int64_t>(Hv) * V, n, V,
             L.fill);
  __syncthreads();

  // out += M U (the carry kernel wrote the inter-chunk half of every row < n).
  lower_times_to_rows<true>(M, kMPitch, Xk, L.pitch, r, c, n, vc, V, [&](int i) {
    return a.out + static_cast<int64_t>(c0 + i) * a.out_token_stride + static_cast<int64_t>(h) * V;
  });
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
// ---- host side --------------------------------------------------------------------------------
namespace ninfer::cuda_plugin::gated_deltanet {
namespace {

using namespace parallel;

const KernelInfo kKernel = {NINFER_OP_GATED_DELTA_RULE, "chunked64_parallel", "ninfer_gated_delta_rule_chunked64_parallel",
                            reinterpret_cast<const void*>(ninfer_gated_delta_rule_chunked64_parallel), kThreads};

// Like chunked64: only calls with a sequence of two or more tokens (decode steps plan to the
// recurrent form), and head dims up to kMaxDim.
// Holds no state between the tokens of a chunk: token states (NINFER_SHAPE_TOKEN_STATES) are the
// recurrent form's.
int32_t supports(const void*, const ninfer_shape* s) {
  return s->tokens > 0 && s->dims[0] >= 2 && s->dims[1] > 0 && s->dims[2] > 0 && s->dims[2] <= kMaxDim &&
         s->dims[3] > 0 && s->dims[3] <= kMaxDim && !(s->flags & NINFER_SHAPE_TOKEN_STATES);
}

// The planner checks residency with the described kernel and this figure, the largest of the
// four kernels' needs (each is launched with its own).
size_t dynamic_smem(const void*, const ninfer_shape* s) {
  return max_smem(static_cast<int>(s->dims[2]), static_cast<int>(s->dims[3]));
}

size_t workspace_bytes(const void*, const ninfer_shape* s, int64_t tokens) {
  return Workspace(nullptr, tokens, s->dims[1], s->dims[2], s->dims[3]).bytes;
}

int32_t launch_one(const void* kernel, const char* what, dim3 grid, int threads, size_t smem, void** params,
                   void* stream, char* err, size_t err_len) {
  cudaError_t rc = set_max_dynamic_smem(kernel, smem);
  if (rc == cudaSuccess)
    rc = ninfer::cuda_plugin::launch_kernel(kernel, grid, dim3(threads), params, smem, static_cast<cudaStream_t>(stream));
  if (rc == cudaSuccess) return NINFER_OK;
  return fail(NINFER_ERR_LAUNCH, err, err_len,
              "gated_delta_rule/chunked64_parallel: %s kernel, grid (%u,%u,%u) block %d smem %zu: %s", what, grid.x,
              grid.y, grid.z, threads, smem, cudaGetErrorString(rc));
}

int32_t launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  ninfer_gated_delta_rule_args a = *static_cast<const ninfer_gated_delta_rule_args*>(args);
  constexpr const char* kName = "gated_delta_rule/chunked64_parallel";
  if (int32_t rc = check_head_ratio(kName, a.k_heads, a.v_heads, err, err_len); rc != NINFER_OK) return rc;
  if (a.k_dim <= 0 || a.k_dim > kMaxDim || a.v_dim <= 0 || a.v_dim > kMaxDim)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "%s: head dims %d x %d, each must be 1..%d", kName,
                a.k_dim, a.v_dim, kMaxDim);
  if (l->dynamic_smem_bytes < max_smem(a.k_dim, a.v_dim))
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                "%s: planned for smaller head dims than %d x %d (%zu B shared memory, %zu needed)", kName, a.k_dim,
                a.v_dim, l->dynamic_smem_bytes, max_smem(a.k_dim, a.v_dim));
  const int64_t begin = l->token_begin, end = l->token_end, range = end - begin;
  if (a.batch.num_seqs <= 0 || range <= 0) return NINFER_OK;
  const Workspace ws(l->workspace, range, a.v_heads, a.k_dim, a.v_dim);
  if (!l->workspace || l->workspace_bytes < ws.bytes)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "%s: workspace of %zu bytes, %zu needed for %lld tokens",
                kName, l->workspace_bytes, ws.bytes, static_cast<long long>(range));
  const int64_t bound = chunk_bound(range, a.batch.num_seqs);
  const int64_t vblocks = (a.v_dim + kCarryCols - 1) / kCarryCols;
  if (bound > 0x7fffffff || a.v_heads > kMaxGridZ || a.v_heads * vblocks > kMaxGridZ)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len, "%s: %lld chunks x %d value heads exceed the grid limits",
                kName, static_cast<long long>(bound), a.v_heads);
  int b32 = static_cast<int>(bound);
  int64_t b = begin, e = end;

  int2* table_out = ws.table;
  void* table_params[] = {&a.batch, &b, &e, &table_out, &b32};
  if (int32_t rc = launch_one(reinterpret_cast<const void*>(ninfer_gdr_parallel_chunk_table), "chunk table", dim3(1),
                              kThreads, 0, table_params, stream, err, err_len);
      rc != NINFER_OK)
    return rc;
  float *G = ws.G, *W = ws.W, *U = ws.U;
  const int2* table = ws.table;
  void* prepare_params[] = {&a, &b, &table, &G, &W, &U};
  if (int32_t rc = launch_one(reinterpret_cast<const void*>(ninfer_gdr_parallel_prepare), "prepare",
                              dim3(b32, a.v_heads), kThreads, prepare_smem(a.k_dim, a.v_dim), prepare_params, stream,
                              err, err_len);
      rc != NINFER_OK)
    return rc;
  const float *Gc = G, *Wc = W;
  void* carry_params[] = {&a, &b, &e, &Gc, &Wc, &U};
  if (int32_t rc = launch_one(reinterpret_cast<const void*>(ninfer_gdr_parallel_carry), "carry",
                              dim3(a.batch.num_seqs, static_cast<unsigned>(a.v_heads * vblocks)), kCarryThreads,
                              carry_smem(a.k_dim), carry_params, stream, err, err_len);
      rc != NINFER_OK)
    return rc;
  const float* Uc = U;
  void* outputs_params[] = {&a, &b, &table, &Gc, &Uc};
  return launch_one(reinterpret_cast<const void*>(ninfer_gated_delta_rule_chunked64_parallel), "outputs",
                    dim3(b32, a.v_heads), kThreads, outputs_smem(a.k_dim, a.v_dim), outputs_params, stream, err,
                    err_len);
}

} // namespace

int32_t register_gated_delta_rule_chunked_parallel(const ninfer_registrar* r, char* err, size_t err_len) {
  return register_form<kKernel>(r, kChunk, 1, {dynamic_smem, supports, launch, workspace_bytes}, err, err_len);
}

} // namespace ninfer::cuda_plugin::gated_deltanet
#endif // __CUDACC_RTC__
