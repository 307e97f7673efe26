// gated_delta_rule, chunked form on CUDA (contract: ninfer/abi/ops/gated_delta_rule.h): 64
// tokens at a time. Used for prefill.
//
// Within a chunk of n <= 64 tokens, with G_i the cumulative log decay from the chunk start to
// token i and S the state before the chunk (the same algebra as the CPU chunked form):
//   A_ij  = beta_i e^{G_i - G_j} (k_i . k_j)                 j < i  (strictly lower)
//   U     = (I + A)^{-1} B,  B_i = beta_i (v_i - e^{G_i} S^T k_i)    (the UT transform)
//   out_i = e^{G_i} S^T q_i + sum_{j<=i} e^{G_i - G_j} (q_i . k_j) u_j
//   S'    = e^{G_n} S + sum_j e^{G_n - G_j} k_j u_j^T
// The inverse is applied by forward substitution on U. Value columns are independent (they
// only meet S, V and U column by column), so a CTA owns one (sequence, value head, block of
// kCols value columns): its [k_dim, kCols] slice of the float32 state stays in shared memory
// over all the sequence's chunks, read from the slot once and written back once. The chunks
// of a sequence run in order inside the CTA; within a chunk the work is:
//   1. stage k, scale*q and the chunk's v columns; warp 0 scans g into G;
//   2. one pass over k_dim gives K K^T, Q K^T (4x4 register tiles per thread), K S and Q S;
//      from them A, B and the inter-chunk part of out;
//   3. forward substitution U_i -= sum_{j<i} A_ij U_j (16 threads per column, n-1 steps);
//   4. out_i adds the masked, decayed Q K^T times U; S is decayed and gets K^T U.
// Everything is float32 (FLA's chunked kernels do the same); the CPU reference runs in double.
//
// What a faster version does (FLA's chunk_gated_delta_rule is organised this way): everything
// that does not depend on the state (G, A, its inverse by blocked substitution, W = A^-1
// diag(beta e^G) K and U0 = A^-1 diag(beta) V) is computed for all chunks of all sequences in
// parallel first; then a thin sequential kernel carries S across chunks (U = U0 - W S,
// S' = e^{G_n} S + K^T diag(e^{G_n - G}) U) and stores S per chunk; then the outputs of all
// chunks are again computed in parallel. The matrix products there run on tensor cores
// (tf32 or split bf16 with float32 accumulation), and the state lives in registers.
#include <cuda_runtime.h>

#include "gated_deltanet/common.cuh"
#include "ninfer/abi/ops/gated_delta_rule.h"
#include "common/grid_dependency.cuh"

namespace ninfer::cuda_plugin::gated_deltanet {
namespace {

constexpr int kThreads = 256;
constexpr int kChunk = 64;
constexpr int kCols = 16;           // value columns per CTA
constexpr int kUPitch = kCols + 1;  // odd pitches: column walks of U and M hit distinct banks
constexpr int kMPitch = kChunk + 1;
constexpr unsigned kFullWarp = 0xffffffffu;

// Thread roles: 16 row groups x 16 columns. Row group r covers chunk rows r, r+16, r+32, r+48.
static_assert(kThreads == 16 * kCols && kChunk == 4 * 16, "thread roles assume 256 threads, 16 columns, 64 rows");

// Shared memory, in floats from the start of the family's dynamic shared memory.
struct Layout {
  int64_t kpitch; // k_dim + 1: row walks of the staged k and q hit distinct banks
  int64_t S, Kc, Qc, U, M, G, beta, wlast, total;
  __host__ __device__ explicit Layout(int64_t k_dim) : kpitch(k_dim + 1) {
    S = 0;                          // state slice [k_dim][kCols]
    Kc = S + k_dim * kCols;         // k rows of the chunk [kChunk][kpitch]
    Qc = Kc + kChunk * kpitch;      // scale * q rows [kChunk][kpitch]
    U = Qc + kChunk * kpitch;       // v, then B, then U [kChunk][kUPitch]
    M = U + kChunk * kUPitch;       // A, then the masked decayed Q K^T [kChunk][kMPitch]
    G = M + kChunk * kMPitch;       // cumulative log decay [kChunk]
    beta = G + kChunk;              // beta, 0 past the chunk's tokens [kChunk]
    wlast = beta + kChunk;          // e^{G_n - G_j} [kChunk]
    total = wlast + kChunk;
  }
};

#ifndef __CUDACC_RTC__ // host side
size_t smem_bytes(int64_t k_dim) { return sizeof(float) * static_cast<size_t>(Layout(k_dim).total); }
#endif

struct Tiles {
  float *S, *Kc, *Qc, *U, *M, *G, *beta, *wlast;
  int kp;
};

// Step 1: k, scale*q and v columns of tokens [c0, c0+n) (zero rows past n, so later steps need
// no row bounds), and the chunk's cumulative log decay.
__device__ void stage_chunk(const ninfer_gated_delta_rule_args& a, const Tiles& s, int c0, int n, int h, int kh,
                            int v0) {
  const int K = a.k_dim, V = a.v_dim, Hv = a.v_heads;
  for (int idx = threadIdx.x; idx < kChunk * K; idx += kThreads) {
    const int i = idx / K, d = idx - i * K;
    float kv = 0.f, qv = 0.f;
    if (i < n) {
      const int64_t at = static_cast<int64_t>(c0 + i) * a.qk_token_stride + static_cast<int64_t>(kh) * K + d;
      kv = a.k[at];
      qv = a.scale * a.q[at];
    }
    s.Kc[i * s.kp + d] = kv;
    s.Qc[i * s.kp + d] = qv;
  }
  for (int idx = threadIdx.x; idx < kChunk * kCols; idx += kThreads) {
    const int i = idx / kCols, c = idx - i * kCols;
    s.U[i * kUPitch + c] = i < n && v0 + c < V ? a.v[static_cast<int64_t>(c0 + i) * a.v_token_stride +
                                                     static_cast<int64_t>(h) * V + v0 + c]
                                               : 0.f;
  }
  const int64_t first = static_cast<int64_t>(c0) * Hv + h;
  scan_decay(a.g + first, a.beta + first, Hv, n, s.G, s.beta);
}

__device__ void chunked(const ninfer_gated_delta_rule_args& a, int64_t begin, int64_t end) {
  const int K = a.k_dim, V = a.v_dim, Hv = a.v_heads;
  const Layout lay(K);
  float* base = reinterpret_cast<float*>(ninfer_gated_deltanet_smem);
  const Tiles s{base + lay.S, base + lay.Kc, base + lay.Qc, base + lay.U, base + lay.M,
                base + lay.G, base + lay.beta, base + lay.wlast, static_cast<int>(lay.kpitch)};
  const int vblocks = (V + kCols - 1) / kCols;
  const int h = blockIdx.z / vblocks, v0 = (blockIdx.z % vblocks) * kCols;
  const int kh = h / (Hv / a.k_heads);
  const int r = threadIdx.x >> 4, c = threadIdx.x & 15; // row group, column
  const bool col_ok = v0 + c < V;

  for (int seq = blockIdx.x; seq < a.batch.num_seqs; seq += gridDim.x) {
    const int t0 = a.batch.seq_start[seq], t1 = a.batch.seq_start[seq + 1];
    if (t0 < begin || t1 > end || t0 >= t1) continue; // whole CTA alike
    float* st = a.state + (static_cast<int64_t>(a.batch.seq_slot[seq]) * Hv + h) * K * V;
    // Thread (r, c) loads, updates and stores rows d = r, r+16, ... of column c: no barrier
    // is needed between a sequence's store and the next one's load.
    for (int d = r; d < K; d += 16) s.S[d * kCols + c] = col_ok ? st[static_cast<int64_t>(d) * V + v0 + c] : 0.f;

    for (int c0 = t0; c0 < t1; c0 += kChunk) {
      const int n = t1 - c0 < kChunk ? t1 - c0 : kChunk;
      __syncthreads(); // the previous chunk is done with the tiles; the state slice is loaded
      stage_chunk(a, s, c0, n, h, kh, v0);
      __syncthreads();

      // Step 2: one pass over k_dim.
      if (threadIdx.x < kChunk) s.wlast[threadIdx.x] = expf(s.G[n - 1] - s.G[threadIdx.x]);
      float kk[4][4], qk[4][4], ks[4], qs[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        ks[i] = qs[i] = 0.f;
#pragma unroll
        for (int j = 0; j < 4; ++j) kk[i][j] = qk[i][j] = 0.f;
      }
      for (int d = 0; d < K; ++d) {
        float ki[4], qi[4], kj[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          ki[i] = s.Kc[(r + 16 * i) * s.kp + d];
          qi[i] = s.Qc[(r + 16 * i) * s.kp + d];
          kj[i] = s.Kc[(c + 16 * i) * s.kp + d];
        }
        const float sd = s.S[d * kCols + c];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          ks[i] = fmaf(ki[i], sd, ks[i]);
          qs[i] = fmaf(qi[i], sd, qs[i]);
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            kk[i][j] = fmaf(ki[i], kj[j], kk[i][j]);
            qk[i][j] = fmaf(qi[i], kj[j], qk[i][j]);
          }
        }
      }
#pragma unroll
      for (int i4 = 0; i4 < 4; ++i4) {
        const int i = r + 16 * i4;
        const float gi = s.G[i], bi = s.beta[i];
#pragma unroll
        for (int j4 = 0; j4 < 4; ++j4) {
          const int j = c + 16 * j4;
          const float decay = j <= i ? expf(gi - s.G[j]) : 0.f;
          s.M[i * kMPitch + j] = j < i ? bi * decay * kk[i4][j4] : 0.f;
          qk[i4][j4] *= decay; // kept for step 4
        }
        const float ei = expf(gi);
        s.U[i * kUPitch + c] = bi * (s.U[i * kUPitch + c] - ei * ks[i4]);
        qs[i4] *= ei;
      }
      __syncthreads();

      // Step 3: U = (I + A)^{-1} B, row by row; 16 threads (one half-warp) per column.
      {
        const int col = threadIdx.x >> 4, part = threadIdx.x & 15;
        for (int i = 1; i < n; ++i) {
          float acc = 0.f;
          for (int j = part; j < i; j += 16) acc = fmaf(s.M[i * kMPitch + j], s.U[j * kUPitch + col], acc);
          acc += __shfl_xor_sync(kFullWarp, acc, 8);
          acc += __shfl_xor_sync(kFullWarp, acc, 4);
          acc += __shfl_xor_sync(kFullWarp, acc, 2);
          acc += __shfl_xor_sync(kFullWarp, acc, 1);
          if (part == 0) s.U[i * kUPitch + col] -= acc;
          __syncthreads();
        }
      }
#pragma unroll
      for (int i4 = 0; i4 < 4; ++i4)
#pragma unroll
        for (int j4 = 0; j4 < 4; ++j4) s.M[(r + 16 * i4) * kMPitch + c + 16 * j4] = qk[i4][j4];
      __syncthreads();

      // Step 4: outputs, then the state (each thread its own rows of column c).
#pragma unroll
      for (int i4 = 0; i4 < 4; ++i4) {
        const int i = r + 16 * i4;
        if (i >= n || !col_ok) continue;
        float o = qs[i4];
        for (int j = 0; j <= i; ++j) o = fmaf(s.M[i * kMPitch + j], s.U[j * kUPitch + c], o);
        a.out[static_cast<int64_t>(c0 + i) * a.out_token_stride + static_cast<int64_t>(h) * V + v0 + c] = o;
      }
      const float e_last = expf(s.G[n - 1]);
      for (int d = r; d < K; d += 16) {
        float acc = s.S[d * kCols + c] * e_last;
        for (int j = 0; j < n; ++j) acc = fmaf(s.wlast[j] * s.Kc[j * s.kp + d], s.U[j * kUPitch + c], acc);
        s.S[d * kCols + c] = acc;
      }
    }
    if (col_ok)
      for (int d = r; d < K; d += 16) st[static_cast<int64_t>(d) * V + v0 + c] = s.S[d * kCols + c];
  }
}

} // namespace
} // namespace ninfer::cuda_plugin::gated_deltanet

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::gated_deltanet::kThreads)
    ninfer_gated_delta_rule_chunked64(ninfer_gated_delta_rule_args a, int64_t token_begin, int64_t token_end) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::gated_deltanet::chunked(a, token_begin, token_end);
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin::gated_deltanet {
namespace {

const KernelInfo kKernel = {NINFER_OP_GATED_DELTA_RULE, "chunked64", "ninfer_gated_delta_rule_chunked64",
                            reinterpret_cast<const void*>(ninfer_gated_delta_rule_chunked64), kThreads};

// The chunked form pays off only for sequences of several tokens; decode steps (one token per
// sequence) plan to the recurrent form.
// Holds no state between the tokens of a chunk: token states (NINFER_SHAPE_TOKEN_STATES) are the
// recurrent form's.
int32_t supports(const void*, const ninfer_shape* s) {
  return s->tokens > 0 && s->dims[0] >= 2 && s->dims[1] > 0 && s->dims[2] > 0 && s->dims[3] > 0 &&
         !(s->flags & NINFER_SHAPE_TOKEN_STATES);
}

size_t dynamic_smem(const void*, const ninfer_shape* s) { return smem_bytes(s->dims[2]); }

int32_t launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  ninfer_gated_delta_rule_args a = *static_cast<const ninfer_gated_delta_rule_args*>(args);
  if (int32_t rc = check_head_ratio("gated_delta_rule/chunked64", a.k_heads, a.v_heads, err, err_len); rc != NINFER_OK)
    return rc;
  if (l->dynamic_smem_bytes < smem_bytes(a.k_dim))
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                "gated_delta_rule/chunked64: planned for k_dim below %d (%zu B shared memory, %zu needed)", a.k_dim,
                l->dynamic_smem_bytes, smem_bytes(a.k_dim));
  if (a.batch.num_seqs <= 0 || a.k_dim <= 0 || a.v_dim <= 0) return NINFER_OK;
  const int64_t problems = static_cast<int64_t>(a.v_heads) * ((a.v_dim + kCols - 1) / kCols);
  if (problems > kMaxGridZ)
    return fail(NINFER_ERR_INVALID_ARGUMENT, err, err_len,
                "gated_delta_rule/chunked64: %d value heads x %d columns exceed the %d CTAs grid.z holds", a.v_heads,
                a.v_dim, kMaxGridZ);
  int64_t b = l->token_begin, e = l->token_end;
  void* params[] = {&a, &b, &e};
  return launch_kernel(kKernel, dim3(l->grid_x, l->grid_y, static_cast<unsigned>(problems)), l, params, stream, err,
                       err_len);
}

} // namespace

int32_t register_gated_delta_rule_chunked(const ninfer_registrar* r, char* err, size_t err_len) {
  return register_form<kKernel>(r, kChunk, 1, {dynamic_smem, supports, launch}, err, err_len);
}

} // namespace ninfer::cuda_plugin::gated_deltanet
#endif // __CUDACC_RTC__
