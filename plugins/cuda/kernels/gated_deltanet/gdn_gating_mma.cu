// gdn_gating on the tensor cores, for prompts: variant `mma` (contract:
// ninfer/abi/ops/gdn_gating.h; the CUDA-core variants are in gated_deltanet/gdn_gating.cu,
// docs/cuda-gated-deltanet.md has the numbers).
//
// The op is the product [T x hidden] . [hidden x 2*heads] (a and b of every head) and a
// pointwise epilogue. Its floor is one read of x (Qwen3.5-27B, 4096 tokens, float32: 84 MB).
// Two kernels per launch:
//   1. ninfer_gdn_gating_mma_{f32,bf16}: grid (token tiles of 128, slices of hidden: 4, up to
//      16 for short prompts, see slices()).
//      A CTA multiplies its 128 tokens by all 2*heads weight rows over its slice of hidden and
//      writes the float32 partial dot products to the caller's workspace. Every W row is read
//      from L2 once per CTA, so W traffic is 2*heads / 128 of the x traffic (0.75 at 48 heads)
//      instead of 3x with 32-token tiles; the slices keep 128 CTAs busy at 4096 tokens.
//   2. ninfer_gdn_gating_mma_finish: adds each token's partials in slice order and
//      applies the gating math (write_gates, shared with the CUDA-core variants).
// Both are ordinary (not cooperative) launches with the programmatic-launch prologue.
//
// Inside a CTA: 8 warps, 4 along the tokens (32 each = two m16 tiles) x 2 along the outputs
// (up to 8 n8 tiles each, so heads <= 64). K streams through a 3-stage cp.async ring of
// 128-byte row pieces (32 float32 or 64 bf16 per row and stage) of x and W. A row's eight
// 16-byte units are stored XOR-swizzled (unit u of row r at u ^ (r % 8)), so the eight rows one
// ldmatrix phase reads, and the eight units one cp.async phase writes, fall in distinct banks
// without padding (3 stages at 64 heads: 96 KiB, within sm_86/89/120's 99 KiB per block).
// Fragments come from ldmatrix in both dtypes: a 16-byte unit is 4 float32 or 8 bf16, which is
// the k extent of one 8x8 b16 matrix row, so the same addresses give the m16n8k8 tf32 fragments
// (4 k per matrix row) and the m16n8k16 bf16 ones (8 k per matrix row).
//   - bf16 inputs: mma.m16n8k16 bf16, float32 accumulation (products exact).
//   - float32 inputs: 3xTF32. v = big + small with big = tf32(v), small = tf32(v - big)
//     (|small| <= 2^-11 |v|); a*w ~ big_a*big_w + big_a*small_w + small_a*big_w, error below
//     2^-20 |a*w| per product (the dropped small*small term and small's own rounding), so the
//     sums keep float32-level accuracy; plain TF32 (error 2^-11 per product) would not. The
//     split is done on the fragments in registers (x stays float32 in shared memory, copied
//     by cp.async without passing through registers).
// Tensor-core accumulation is not specified to round to nearest (measured on Volta to Ampere:
// the sum inside one MMA is truncated), so a long chain of MMAs into one accumulator could
// drift toward zero by up to an ulp of the running sum per MMA. Each 128-byte chunk
// (4 k steps: 12 MMAs per tile with float32, 4 with bf16) therefore accumulates into fresh
// registers that are then added to float32 totals with ordinary (round-to-nearest) adds.
//
// Plain mma.sync/ldmatrix/cp.async (sm_80+), no wgmma or TMA: one source for sm_89, sm_90,
// sm_120a and cuda-generic (NVRTC for the card present, or its compute_80 PTX); the host side is
// left out under __CUDACC_RTC__.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "attention/mma.cuh"
#include "gated_deltanet/gdn_gating_common.cuh"
#include "common/grid_dependency.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include <algorithm>
#include <cstdio>

#include "../build_resources.hpp"
#include "../../cuda_variant.hpp"
#endif

namespace ninfer::cuda_plugin::gating_mma {

using attention::mma::Bf16Inputs;
using attention::mma::ldsm_x4;
using attention::mma::smem_addr;

constexpr int kThreads = 256;
constexpr int kWarpsM = 4; // warps along the tokens, 32 tokens (two m16 tiles) each
constexpr int kWarpsN = 2; // warps along the outputs
constexpr int kTokensPerCta = 32 * kWarpsM;
constexpr int kSplit = 4;         // slices of hidden (grid.y) of a long prompt
constexpr int kMaxSplit = 16;     // ... and of a short one, to keep the GPU busy:
constexpr int kTargetCtas = 128;  //     more slices while the launch has fewer CTAs than this
constexpr int kMinSliceChunks = 4; //    and every slice keeps at least this many chunks
constexpr int kMaxHeads = 64;
constexpr int kMaxWarpTiles = 2 * kMaxHeads / 8 / kWarpsN; // n8 tiles per warp at most
constexpr int kRowBytes = 128; // of each staged row per stage: 8 swizzled 16-byte units
constexpr int kKSteps = kRowBytes / 32; // a k step takes 32 bytes (2 units) of a row
constexpr int kStages = 3;
constexpr int kMinTokens = 64; // shorter calls (decode) keep the CUDA-core variants
constexpr int kFinishThreads = 256;

__host__ __device__ constexpr int n_tiles(int heads) { return (2 * heads + 7) / 8; }
// Staged W rows: w_a rows, w_b rows, zero rows up to a whole n8 tile.
__host__ __device__ constexpr int w_rows(int heads) { return 8 * n_tiles(heads); }
__host__ __device__ constexpr size_t stage_bytes(int heads) {
  return static_cast<size_t>(kTokensPerCta + w_rows(heads)) * kRowBytes;
}
__host__ __device__ constexpr size_t smem_bytes(int heads) { return kStages * stage_bytes(heads); }
// Slices of hidden for a launch of `tokens` tokens: kSplit, doubled while the launch has fewer
// than kTargetCtas CTAs (a property of the shape, like the tile: 128 CTAs at 4096 tokens) and
// each slice keeps kMinSliceChunks chunks. A 300-token 27B call gets 3 x 16 CTAs, not 3 x 4.
__host__ __device__ constexpr int slices(int64_t tokens, int hidden, int elem_bytes) {
  const int64_t tiles = (tokens + kTokensPerCta - 1) / kTokensPerCta;
  const int64_t chunks = (static_cast<int64_t>(hidden) * elem_bytes + 127) / 128;
  int s = kSplit;
  while (s < kMaxSplit && tiles * s < kTargetCtas && chunks / (2 * s) >= kMinSliceChunks) s *= 2;
  return s;
}
// Byte offset of 16-byte unit u of row r within a stage's x or W tile.
__host__ __device__ constexpr uint32_t unit_offset(int r, int u) {
  return static_cast<uint32_t>(r * kRowBytes + ((u ^ (r & 7)) << 4));
}

// --- PTX building blocks not in attention/mma.cuh -------------------------------------------

// Two 8x8 16-bit matrices (lanes 0-15 give the row addresses).
__device__ __forceinline__ void ldsm_x2(uint32_t& r0, uint32_t& r1, uint32_t a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r0), "=r"(r1) : "r"(a));
}

// d += A(16x8, row) . B(8x8, col), tf32 inputs, float32 accumulators. Fragments (g = lane / 4,
// c = lane % 4): a0 (g, c) a1 (g+8, c) a2 (g, c+4) a3 (g+8, c+4); b0 (k c, n g) b1 (k c+4, n g);
// d as for m16n8k16.
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t to_tf32(float v) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(v));
  return r;
}

// v (float32 bits) = big + small, both tf32.
__device__ __forceinline__ void split_tf32(uint32_t v, uint32_t& big, uint32_t& small) {
  big = to_tf32(__uint_as_float(v));
  small = to_tf32(__uint_as_float(v) - __uint_as_float(big));
}

// 16 bytes global -> shared: the first `n` elements of src, zeros after them. vec: one
// cp.async (src 16-byte aligned); otherwise element by element through registers (rows of
// any alignment), stored at once and published by the same barrier as the copies.
template <class T>
__device__ __forceinline__ void copy16(unsigned char* dst, const T* src, int n, bool vec) {
  constexpr int kElems = 16 / sizeof(T);
  if (vec) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)),
                 "l"(__cvta_generic_to_global(src)), "r"(n * static_cast<int>(sizeof(T)))
                 : "memory");
  } else {
    using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>;
    const Bits* s = reinterpret_cast<const Bits*>(src);
    Bits* d = reinterpret_cast<Bits*>(dst);
#pragma unroll
    for (int i = 0; i < kElems; ++i) d[i] = i < n ? s[i] : Bits(0);
  }
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// --- the product --------------------------------------------------------------------------

// Per-CTA constants of one launch.
template <class T>
struct Tile {
  static constexpr int kElems16 = 16 / sizeof(T);          // elements per 16 bytes
  static constexpr int kChunkElems = kRowBytes / sizeof(T); // k per chunk
  const T* x;
  const T* wa;
  const T* wb;
  int64_t x_stride;
  int64_t tok_end;
  int hidden, heads, wrows;
  bool vec_x, vec_w;

  // Stage chunk `chunk` (k in [chunk * kChunkElems, + kChunkElems)) of tokens [t0, t0 + 128)
  // and of every W row into `stage`. Elements past hidden, tokens past tok_end and W rows past
  // 2*heads are zeros.
  __device__ void load(unsigned char* stage, int64_t t0, int chunk) const {
    const int k0 = chunk * kChunkElems;
    unsigned char* xs = stage;
    unsigned char* ws = stage + kTokensPerCta * kRowBytes;
#pragma unroll
    for (int i = 0; i < kTokensPerCta * 8 / kThreads; ++i) {
      const int u = threadIdx.x + i * kThreads;
      const int r = u >> 3, q = u & 7, k = k0 + q * kElems16;
      const int64_t t = t0 + r;
      const int n = t < tok_end && k < hidden ? min(kElems16, hidden - k) : 0;
      copy16<T>(xs + unit_offset(r, q), n ? x + t * x_stride + k : x, n, vec_x);
    }
    for (int u = threadIdx.x; u < wrows * 8; u += kThreads) {
      const int r = u >> 3, q = u & 7, k = k0 + q * kElems16;
      const T* row = r < heads ? wa + static_cast<int64_t>(r) * hidden
                               : r < 2 * heads ? wb + static_cast<int64_t>(r - heads) * hidden : nullptr;
      const int n = row && k < hidden ? min(kElems16, hidden - k) : 0;
      copy16<T>(ws + unit_offset(r, q), n ? row + k : wa, n, vec_w);
    }
  }
};

// One k step (32 bytes of every row) of a warp: its two m16 tiles x its `nw` n8 tiles.
// a_addr[m]: this lane's ldmatrix address for m tile m; b_addr: for the warp's first n8 tile
// pair (pair p is 16 rows further, same swizzle).
template <class T>
__device__ __forceinline__ void k_step(float (&c)[2][kMaxWarpTiles][4], const uint32_t (&a_addr)[2], uint32_t b_addr,
                                       int nw) {
  constexpr bool kF32 = std::is_same_v<T, float>;
  uint32_t a[2][4];
#pragma unroll
  for (int m = 0; m < 2; ++m) ldsm_x4(a[m], a_addr[m]);
  uint32_t a_big[2][4], a_small[2][4];
  if constexpr (kF32) {
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int i = 0; i < 4; ++i) split_tf32(a[m][i], a_big[m][i], a_small[m][i]);
  }
#pragma unroll
  for (int p = 0; p < kMaxWarpTiles / 2; ++p) {
    if (2 * p >= nw) break;
    uint32_t b[4];
    const uint32_t addr = b_addr + p * 16 * kRowBytes;
    if (2 * p + 1 < nw)
      ldsm_x4(b, addr);
    else
      ldsm_x2(b[0], b[1], addr);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int j = 2 * p + h;
      if (j >= nw) break;
      if constexpr (kF32) {
        uint32_t b0_big, b0_small, b1_big, b1_small;
        split_tf32(b[2 * h], b0_big, b0_small);
        split_tf32(b[2 * h + 1], b1_big, b1_small);
#pragma unroll
        for (int m = 0; m < 2; ++m) { // small terms first: they are lost least in the sum
          mma_tf32(c[m][j], a_small[m], b0_big, b1_big);
          mma_tf32(c[m][j], a_big[m], b0_small, b1_small);
          mma_tf32(c[m][j], a_big[m], b0_big, b1_big);
        }
      } else {
#pragma unroll
        for (int m = 0; m < 2; ++m) Bf16Inputs::mma(c[m][j], a[m], b[2 * h], b[2 * h + 1]);
      }
    }
  }
}

// Partial dot products of the launch's tokens [tok_begin, tok_end) over this CTA's slice of
// hidden: ws[(slice * L + t - tok_begin) * 2*heads + col], col < heads: w_a rows, then w_b.
template <class T>
__device__ void partials(const ninfer_gdn_gating_args& a, int64_t tok_begin, int64_t tok_end, float* ws) {
  extern __shared__ __align__(16) unsigned char smem[];
  using Tl = Tile<T>;
  const int heads = a.heads, n_out = 2 * heads;
  const Tl tl{static_cast<const T*>(a.x),
              static_cast<const T*>(a.w_a),
              static_cast<const T*>(a.w_b),
              a.x_row_stride,
              tok_end,
              a.hidden,
              heads,
              w_rows(heads),
              reinterpret_cast<uintptr_t>(a.x) % 16 == 0 && a.x_row_stride * sizeof(T) % 16 == 0,
              reinterpret_cast<uintptr_t>(a.w_a) % 16 == 0 && reinterpret_cast<uintptr_t>(a.w_b) % 16 == 0 &&
                  a.hidden * sizeof(T) % 16 == 0};
  const size_t stage_size = stage_bytes(heads);

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // Warps w and w + 4 share an SM sub-partition (and its tensor core): give them the two
  // output halves, so an odd tile count loads both sub-partitions alike.
  const int wm = warp % kWarpsM, wn = warp / kWarpsM;
  const int per_warp = (n_tiles(heads) + kWarpsN - 1) / kWarpsN;
  const int j0 = wn * per_warp;
  const int nw = max(0, min(n_tiles(heads), j0 + per_warp) - j0);

  // This CTA's slice: whole chunks, so only the last chunk of hidden is ever partial.
  const int chunks = (a.hidden + Tl::kChunkElems - 1) / Tl::kChunkElems;
  const int per_slice = (chunks + gridDim.y - 1) / gridDim.y;
  const int c_begin = min(chunks, static_cast<int>(blockIdx.y) * per_slice);
  const int n_chunks = min(chunks, c_begin + per_slice) - c_begin;

  // ldmatrix addresses of this lane (offsets within a stage), per k step. A (x rows): matrices
  // (rows 0-7 | 8-15) x (unit 0 | 1 of the k step), lanes 8i.. give matrix i. B (W rows):
  // (n tile j unit 0 | j unit 1 | j+1 unit 0 | j+1 unit 1). Every row group starts at a multiple
  // of 8, so a lane's row % 8 is lane % 8 whichever tile it reads.
  const int a_row = wm * 32 + (lane & 7) + ((lane >> 3) & 1) * 8, a_unit = lane >> 4;
  const int b_row = j0 * 8 + (lane & 7) + (lane >> 4) * 8, b_unit = (lane >> 3) & 1;
  uint32_t a_off[kKSteps][2], b_off[kKSteps];
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks) {
#pragma unroll
    for (int m = 0; m < 2; ++m) a_off[ks][m] = unit_offset(a_row + 16 * m, 2 * ks + a_unit);
    b_off[ks] = kTokensPerCta * kRowBytes + unit_offset(b_row, 2 * ks + b_unit);
  }
  const uint32_t smem0 = smem_addr(smem);

  const int64_t launch_tokens = tok_end - tok_begin;
  const int64_t tiles = (launch_tokens + kTokensPerCta - 1) / kTokensPerCta;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t t0 = tok_begin + tile * kTokensPerCta;
    float acc[2][kMaxWarpTiles][4];
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int j = 0; j < kMaxWarpTiles; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[m][j][i] = 0.f;

#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < n_chunks) tl.load(smem + s * stage_size, t0, c_begin + s);
      cp_async_commit();
    }
    for (int i = 0; i < n_chunks; ++i) {
      cp_async_wait<kStages - 2>(); // this thread's copies of chunk i have landed
      __syncthreads();              // everyone's have; everyone is done with chunk i - 1
      const int next = i + kStages - 1;
      if (next < n_chunks) tl.load(smem + (next % kStages) * stage_size, t0, c_begin + next);
      cp_async_commit();

      const uint32_t stage = smem0 + static_cast<uint32_t>((i % kStages) * stage_size);
      float c[2][kMaxWarpTiles][4];
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int j = 0; j < kMaxWarpTiles; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) c[m][j][e] = 0.f;
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks) {
        const uint32_t a_addr[2] = {stage + a_off[ks][0], stage + a_off[ks][1]};
        k_step<T>(c, a_addr, stage + b_off[ks], nw);
      }
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int j = 0; j < kMaxWarpTiles; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[m][j][e] += c[m][j][e];
    }
    cp_async_wait<0>();
    __syncthreads(); // the next tile's first copies reuse the stages

    // acc[m][j][e]: token row wm*32 + 16m + g + 8*(e >> 1), output column 8*(j0 + j) + 2c + (e &
    // 1).
    const int g = lane >> 2, cq = lane & 3;
    float* out = ws + static_cast<int64_t>(blockIdx.y) * launch_tokens * n_out;
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int j = 0; j < kMaxWarpTiles; ++j) {
        const int col = 8 * (j0 + j) + 2 * cq;
        if (j >= nw || col >= n_out) continue; // n_out is even: col + 1 < n_out as well
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t t = t0 + wm * 32 + 16 * m + g + 8 * h;
          if (t < tok_end)
            *reinterpret_cast<float2*>(out + (t - tok_begin) * n_out + col) =
                make_float2(acc[m][j][2 * h], acc[m][j][2 * h + 1]);
        }
      }
  }
}

// Sums each token's `split` partials (slice order: deterministic) and writes g and beta.
__device__ void finish(const ninfer_gdn_gating_args& a, int64_t tok_begin, int64_t tok_end, const float* ws,
                       int split) {
  const int heads = a.heads, n_out = 2 * heads;
  const int64_t launch_tokens = tok_end - tok_begin;
  const int64_t outputs = launch_tokens * heads;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < outputs;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t tt = o / heads;
    const int h = static_cast<int>(o % heads);
    float av = 0.f, bv = 0.f;
    for (int s = 0; s < split; ++s) {
      const float* row = ws + (s * launch_tokens + tt) * n_out;
      av += row[h];
      bv += row[heads + h];
    }
    write_gates(a, tok_begin + tt, h, av, bv);
  }
}

} // namespace ninfer::cuda_plugin::gating_mma

// Kernel entry points: extern "C" names are the keys of the build-time resource table.
extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::gating_mma::kThreads)
    ninfer_gdn_gating_mma_f32(ninfer_gdn_gating_args a, int64_t b, int64_t e, float* ws) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::gating_mma::partials<float>(a, b, e, ws);
}
extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::gating_mma::kThreads)
    ninfer_gdn_gating_mma_bf16(ninfer_gdn_gating_args a, int64_t b, int64_t e, float* ws) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::gating_mma::partials<__nv_bfloat16>(a, b, e, ws);
}
extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::gating_mma::kFinishThreads)
    ninfer_gdn_gating_mma_finish(ninfer_gdn_gating_args a, int64_t b, int64_t e, const float* ws, int32_t split) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::gating_mma::finish(a, b, e, ws, split);
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

using namespace gating_mma;
using PartialsKernel = void (*)(ninfer_gdn_gating_args, int64_t, int64_t, float*);

constexpr const char* kSymbolF32 = "ninfer_gdn_gating_mma_f32";
constexpr const char* kSymbolBf16 = "ninfer_gdn_gating_mma_bf16";

// The partials kernel whose resources the variant reports (set at registration).
PartialsKernel g_planned = nullptr;
const char* g_planned_symbol = nullptr;

int32_t supports(const void*, const ninfer_shape* s) {
  return (s->dtype == NINFER_DTYPE_F32 || s->dtype == NINFER_DTYPE_BF16) && s->dims[0] > 0 && s->dims[1] > 0 &&
         s->dims[1] <= kMaxHeads && s->tokens >= kMinTokens;
}

size_t dyn_smem(const void*, const ninfer_shape* s) { return smem_bytes(static_cast<int>(s->dims[1])); }

size_t workspace(const void*, const ninfer_shape* s, int64_t launch_tokens) {
  const int split = slices(launch_tokens, static_cast<int>(s->dims[0]), s->dtype == NINFER_DTYPE_F32 ? 4 : 2);
  return static_cast<size_t>(split) * launch_tokens * 2 * s->dims[1] * sizeof(float);
}

int32_t launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  ninfer_gdn_gating_args a = *static_cast<const ninfer_gdn_gating_args*>(args);
  int64_t b = l->token_begin, e = l->token_end;
  // grid.y: the slices this launch's token count gets (the planner's grid.y is kSplit, the
  // figure for long prompts; shorter ones get more, see slices()).
  int32_t split = slices(e - b, a.hidden, a.dtype == NINFER_DTYPE_F32 ? 4 : 2);
  const size_t need = static_cast<size_t>(split) * (e - b) * 2 * a.heads * sizeof(float);
  if ((a.dtype != NINFER_DTYPE_F32 && a.dtype != NINFER_DTYPE_BF16) || a.heads < 1 || a.heads > kMaxHeads ||
      a.hidden < 1 || split < 1 || l->workspace_bytes < need || !l->workspace) {
    std::snprintf(err, err_len,
                  "gdn_gating/mma: needs dtype F32 or BF16, 1-%d heads (got %d), hidden >= 1 and %zu bytes of "
                  "workspace for %d slices (got %zu)",
                  kMaxHeads, a.heads, need, split, l->workspace_bytes);
    return NINFER_ERR_INVALID_ARGUMENT;
  }
  const void* k = reinterpret_cast<const void*>(a.dtype == NINFER_DTYPE_F32 ? ninfer_gdn_gating_mma_f32
                                                                            : ninfer_gdn_gating_mma_bf16);
  float* ws = static_cast<float*>(l->workspace);
  auto s = static_cast<cudaStream_t>(stream);
  cudaError_t rc = set_max_dynamic_smem(k, l->dynamic_smem_bytes);
  if (rc == cudaSuccess) {
    void* params[] = {&a, &b, &e, &ws};
    rc = launch_kernel(k, dim3(l->grid_x, split), dim3(l->block), params, l->dynamic_smem_bytes, s);
  }
  if (rc == cudaSuccess) {
    // One thread per (token, head), grid-stride beyond 4096 CTAs.
    const int64_t outputs = (e - b) * a.heads;
    const unsigned blocks =
        static_cast<unsigned>(std::min<int64_t>(4096, (outputs + kFinishThreads - 1) / kFinishThreads));
    const float* partial = ws;
    void* params[] = {&a, &b, &e, &partial, &split};
    rc = launch_kernel(reinterpret_cast<const void*>(ninfer_gdn_gating_mma_finish), dim3(blocks),
                       dim3(kFinishThreads), params, 0, s);
  }
  if (rc != cudaSuccess) {
    std::snprintf(err, err_len, "gdn_gating/mma: launch grid (%d,%d) block %d smem %zu tokens [%lld,%lld): %s",
                  l->grid_x, split, l->block, l->dynamic_smem_bytes, static_cast<long long>(b),
                  static_cast<long long>(e), cudaGetErrorString(rc));
    cudaGetLastError(); // a failed launch must not poison the next call's error check
    return NINFER_ERR_LAUNCH;
  }
  return NINFER_OK;
}

int32_t query(const void*, ninfer_kernel_resources* out, char* err, size_t err_len) {
  return query_kernel_attributes(reinterpret_cast<const void*>(g_planned), g_planned_symbol, kThreads, out, err,
                                 err_len);
}

int32_t driver_blocks(const void*, size_t dyn, int32_t* blocks, char* err, size_t err_len) {
  return query_driver_blocks(reinterpret_cast<const void*>(g_planned), kThreads, dyn, blocks, err, err_len);
}

} // namespace

int32_t register_gdn_gating_mma(const ninfer_registrar* r, char* err, size_t err_len) {
  static ninfer_variant v{};
  const BuildResource* f32 = find_build_resource(kSymbolF32);
  const BuildResource* bf16 = find_build_resource(kSymbolBf16);
  if (!f32 || !bf16) {
    std::snprintf(err, err_len, "gdn_gating/mma: kernel missing from the build resource table");
    return NINFER_ERR_UNSUPPORTED;
  }
  // Plan with the kernel needing more registers, so a plan is legal for either dtype (their
  // shared memory is all dynamic and the same).
  const bool f32_worse = f32->registers >= bf16->registers;
  g_planned = f32_worse ? ninfer_gdn_gating_mma_f32 : ninfer_gdn_gating_mma_bf16;
  g_planned_symbol = f32_worse ? kSymbolF32 : kSymbolBf16;
  v.op = NINFER_OP_GDN_GATING;
  v.name = "mma";
  v.exec = NINFER_EXEC_CUDA;
  // grid.x: every token tile; grid.y: kSplit slices (more for short prompts, chosen at launch).
  v.geometry = NINFER_GEOMETRY_TOKEN_TILED;
  v.cooperative = 0;
  v.split_k = kSplit;
  v.tokens_per_cta = kTokensPerCta;
  v.dtype_mask = (1u << NINFER_DTYPE_F32) | (1u << NINFER_DTYPE_BF16);
  v.resources = make_resources(f32_worse ? *f32 : *bf16, kThreads);
  v.dynamic_smem_bytes = dyn_smem;
  v.workspace_bytes = workspace;
  v.supports = supports;
  v.launch = launch;
  v.query_loaded_resources = query;
  v.query_driver_blocks_per_sm = driver_blocks;
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
