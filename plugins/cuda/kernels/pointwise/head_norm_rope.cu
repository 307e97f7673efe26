// head_norm_rope: per-head RMSNorm of attention's q and k heads, then the rotary embedding of
// both, in place, in one launch (contract: ninfer/abi/ops/head_norm_rope.h). It replaces the
// q norm, k norm and rope launches of every attention layer: at one token per step those are
// pure latency (Qwen3-8B: 3 of the ~12 launches of a layer, ~100 of a step's ~450).
//
// One warp per head row: the q rows of a token, then its k rows, kWarps rows per CTA, so a
// token's rows are spread over grid.y = ceil((q_heads + k_heads) / kWarps) CTAs (Qwen3-8B: 40
// rows, 10 CTAs, one round). Token tiles are strided over grid.x. A lane holds the rotary pairs
// (x[j], x[j + half]) for j = lane + 32u and the unrotated elements rotary_dim + lane + 32u in
// registers: the row is read once, its sum of squares reduced by warp shuffles, and each pair
// normalised and rotated where it lies: one global read and one write per element. A row's
// loads are all issued before the first use: the first token's before inv_freq is evaluated,
// each next token's before the CTA's barrier at the end of the current one. The cos/sin table
// is computed as pointwise/rope.cu does (rope_sin_cos in common/pointwise_math.cuh).
//
// head_norm_rope_append (contract: ninfer/abi/ops/head_norm_rope_append.h) is the same kernel
// with kv_heads more warps for the v rows: a k row's warp also writes its rotated values,
// rounded to the cache dtype, into the token's cache row, and a v row's warp writes its row
// there as loaded. That is kv_append's work inside this launch: one launch fewer per attention
// layer of a decode step.
//
// Numerics are those of rms_norm's and rope's kernels: inv = rsqrtf(sum / head_dim + eps),
// y = x * inv * scale in float32, then y1 * cos - y2 * sin with the same float32 cos and sin.
// Only the order of the float32 sum of squares differs from the two-op path.
#include <cuda_runtime.h>

#include "attention/shapes.hpp"
#include "common/grid_dependency.cuh"
#include "pointwise/kv_cache_write.cuh"
#include "ninfer/abi/ops/head_norm_rope.h"
#include "ninfer/abi/ops/head_norm_rope_append.h"
#include "common/pointwise_math.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include "../../cuda_variant.hpp"
#include "pointwise/families.hpp"
#include "common/token_variant.cuh"
#endif

namespace ninfer::cuda_plugin {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
// Register slots per lane: rotary pairs (rotary_dim <= 256) and unrotated elements
// (head_dim - rotary_dim <= 256). Larger heads are not supported; model code then runs the
// three separate ops.
constexpr int kPairSlots = 4;
constexpr int kTailSlots = 8;
constexpr int kMaxHalf = 32 * kPairSlots;
constexpr int kMaxTail = 32 * kTailSlots;

// One head row of one token in a lane's registers: the rotary pairs and the unrotated tail.
struct RowRegs {
  float x1[kPairSlots], x2[kPairSlots], xt[kTailSlots];
  double position;
};

__device__ __forceinline__ void load_row(RowRegs& r, const float* x, bool active, int lane, int half, int rotary_dim,
                                         int head_dim) {
#pragma unroll
  for (int u = 0; u < kPairSlots; ++u) {
    const int j = lane + 32 * u;
    r.x1[u] = active && j < half ? x[j] : 0.f;
    r.x2[u] = active && j < half ? x[j + half] : 0.f;
  }
#pragma unroll
  for (int u = 0; u < kTailSlots; ++u) {
    const int j = rotary_dim + lane + 32 * u;
    r.xt[u] = active && j < head_dim ? x[j] : 0.f;
  }
}

// The first element of token t's cache row for kv head h, or -1 (a token outside the cache).
__device__ __forceinline__ int64_t cache_row(const ninfer_kv_append_args& app, int64_t t, int h) {
  const int64_t row = kv_token_row(app.cache, app.batch, t);
  return row < 0 ? -1 : row + static_cast<int64_t>(h) * app.cache.head_dim;
}

// kAppend: head_norm_rope_append, whose k rows also go to the cache (elements E) and whose
// v rows (warps after the k rows) go there unchanged; otherwise head_norm_rope, `app` unused.
template <class E, bool kAppend>
__device__ void head_norm_rope_rows(const ninfer_head_norm_rope_args& a, const ninfer_kv_append_args& app,
                                    int64_t begin, int64_t end) {
  // Dynamic shared memory: inv_freq (double) then cos and sin (float), rotary_dim / 2 each.
  extern __shared__ __align__(16) unsigned char smem[];
  const int half = a.rotary_dim / 2;
  double* inv_freq = reinterpret_cast<double*>(smem);
  float* cs = reinterpret_cast<float*>(inv_freq + half);
  float* sn = cs + half;

  // This warp's head row: q rows first, then k rows, then (kAppend) v rows.
  const int lane = threadIdx.x & 31;
  const int row = static_cast<int>(blockIdx.y) * kWarps + static_cast<int>(threadIdx.x >> 5);
  const bool active = row < a.q_heads + a.k_heads * (kAppend ? 2 : 1);
  const bool is_q = row < a.q_heads;
  const bool is_v = kAppend && row >= a.q_heads + a.k_heads;
  const int kv_head = is_q ? 0 : is_v ? row - a.q_heads - a.k_heads : row - a.q_heads;
  // Rows are read from `in` and, except v rows, rewritten in place (`out`).
  float* const out = is_q ? a.q + static_cast<int64_t>(row) * a.q_head_stride
                          : is_v ? nullptr : a.k + static_cast<int64_t>(kv_head) * a.k_head_stride;
  const float* const in = is_v ? app.v + static_cast<int64_t>(kv_head) * a.head_dim : out;
  const int64_t token_stride = is_q ? a.q_token_stride : is_v ? app.v_token_stride : a.k_token_stride;
  const float* weight = is_q ? a.q_weight : a.k_weight;
  const bool to_cache_row = kAppend && active && !is_q;
  E* const cache = to_cache_row ? static_cast<E*>(is_v ? app.cache.v : app.cache.k) : nullptr;

  // Before the launch wait (common/grid_dependency.cuh), overlapping the previous kernel: the first
  // token's position, cache row and cos/sin table, and the row's scales. None of them is written
  // by a kernel of the step (positions and the batch arrays are uploaded before it, weights
  // never change). After the wait only the row itself is loaded (the projection just wrote it).
  int64_t t = begin + blockIdx.x;
  RowRegs r;
  int64_t at = -1;
  if (t < end) {
    r.position = a.positions[t];
    if (to_cache_row) at = cache_row(app, t, kv_head);
  }
  const bool normed = active && !is_v;
  const float offset = a.weight_offset ? 1.f : 0.f;
  float w1[kPairSlots], w2[kPairSlots], wt[kTailSlots];
#pragma unroll
  for (int u = 0; u < kPairSlots; ++u) {
    const int j = lane + 32 * u;
    w1[u] = normed && j < half ? offset + weight[j] : 0.f;
    w2[u] = normed && j < half ? offset + weight[j + half] : 0.f;
  }
#pragma unroll
  for (int u = 0; u < kTailSlots; ++u) {
    const int j = a.rotary_dim + lane + 32 * u;
    wt[u] = normed && j < a.head_dim ? offset + weight[j] : 0.f;
  }
  for (int i = threadIdx.x; i < half; i += blockDim.x) inv_freq[i] = rope_inv_freq(a.theta, i, a.rotary_dim);
  __syncthreads(); // inv_freq
  if (t < end)
    for (int i = threadIdx.x; i < half; i += blockDim.x) rope_sin_cos(r.position, inv_freq[i], &sn[i], &cs[i]);
  grid_dependency_prologue();
  if (t < end) load_row(r, in + t * token_stride, active, lane, half, a.rotary_dim, a.head_dim);

  for (; t < end; t += gridDim.x) {
    float* x = out ? out + t * token_stride : nullptr;
    float ss = 0.f;
#pragma unroll
    for (int u = 0; u < kPairSlots; ++u) ss += r.x1[u] * r.x1[u] + r.x2[u] * r.x2[u];
#pragma unroll
    for (int u = 0; u < kTailSlots; ++u) ss += r.xt[u] * r.xt[u];
    const float inv = rsqrtf(warp_sum(ss) / a.head_dim + a.eps);
    __syncthreads(); // the token's cos/sin table is complete

    E* const c = at >= 0 ? cache + at : nullptr;
    if (is_v) {
      if (c) {
#pragma unroll
        for (int u = 0; u < kPairSlots; ++u) {
          const int j = lane + 32 * u;
          if (j < half) {
            to_cache(r.x1[u], c[j]);
            to_cache(r.x2[u], c[j + half]);
          }
        }
#pragma unroll
        for (int u = 0; u < kTailSlots; ++u) {
          const int j = a.rotary_dim + lane + 32 * u;
          if (j < a.head_dim) to_cache(r.xt[u], c[j]);
        }
      }
    } else if (active) {
#pragma unroll
      for (int u = 0; u < kPairSlots; ++u) {
        const int j = lane + 32 * u;
        if (j < half) {
          const float y1 = r.x1[u] * inv * w1[u], y2 = r.x2[u] * inv * w2[u];
          const float o1 = y1 * cs[j] - y2 * sn[j], o2 = y2 * cs[j] + y1 * sn[j];
          x[j] = o1;
          x[j + half] = o2;
          if (kAppend && c) {
            to_cache(o1, c[j]);
            to_cache(o2, c[j + half]);
          }
        }
      }
#pragma unroll
      for (int u = 0; u < kTailSlots; ++u) {
        const int j = a.rotary_dim + lane + 32 * u;
        if (j < a.head_dim) {
          const float o = r.xt[u] * inv * wt[u];
          x[j] = o;
          if (kAppend && c) to_cache(o, c[j]);
        }
      }
    }
    // The next token's row (another token's memory: no hazard with the writes above) loads
    // while the CTA waits for every warp to finish with this token's table.
    const int64_t next = t + gridDim.x;
    if (next < end) {
      r.position = a.positions[next];
      load_row(r, in + next * token_stride, active, lane, half, a.rotary_dim, a.head_dim);
      if (to_cache_row) at = cache_row(app, next, kv_head);
    }
    __syncthreads(); // every warp is done with this token's cos/sin
    if (next < end)
      for (int i = threadIdx.x; i < half; i += blockDim.x) rope_sin_cos(r.position, inv_freq[i], &sn[i], &cs[i]);
  }
}

} // namespace
} // namespace ninfer::cuda_plugin

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kThreads)
    ninfer_head_norm_rope_f32(ninfer_head_norm_rope_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::head_norm_rope_rows<float, false>(a, ninfer_kv_append_args{}, b, e); // own launch wait
}

#define NINFER_HEAD_NORM_ROPE_APPEND(NAME, E)                                                               \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kThreads)                                \
      ninfer_head_norm_rope_append_##NAME(ninfer_head_norm_rope_append_args a, int64_t b, int64_t e) {       \
    ninfer::cuda_plugin::head_norm_rope_rows<E, true>(a.rope, a.append, b, e); /* its own launch wait */    \
  }
NINFER_HEAD_NORM_ROPE_APPEND(f32, float)
NINFER_HEAD_NORM_ROPE_APPEND(f16, __half)
NINFER_HEAD_NORM_ROPE_APPEND(bf16, __nv_bfloat16)

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

size_t table_bytes(int64_t rotary_dim) {
  return static_cast<size_t>(rotary_dim > 0 ? rotary_dim / 2 : 0) * (sizeof(double) + 2 * sizeof(float));
}

// What both ops ask of a shape and of their head_norm_rope arguments; `rows`: warps per token.
bool rope_shape_fits(const ninfer_shape* s, int64_t rows) {
  const int64_t head_dim = s->dims[0], q_heads = s->dims[1], k_heads = s->dims[2], rotary = s->dims[3];
  return s->tokens > 0 && head_dim > 0 && q_heads >= 0 && k_heads >= 0 && q_heads + k_heads > 0 &&
         (rows + kWarps - 1) / kWarps <= 65535 && rotary > 0 && rotary % 2 == 0 && rotary <= head_dim &&
         rotary / 2 <= kMaxHalf && head_dim - rotary <= kMaxTail;
}
const char* rope_args_invalid(const ninfer_head_norm_rope_args& a, const ninfer_launch& l) {
  if (a.rotary_dim <= 0 || a.rotary_dim % 2 || a.rotary_dim > a.head_dim)
    return "rotary_dim must be even and in (0, head_dim]";
  if (a.rotary_dim / 2 > kMaxHalf || a.head_dim - a.rotary_dim > kMaxTail)
    return "head row larger than the kernel's registers (rotary_dim <= 256, head_dim - rotary_dim <= 256)";
  if (a.q_heads < 0 || a.k_heads < 0 || a.q_heads + a.k_heads == 0) return "no head rows";
  if (l.dynamic_smem_bytes < table_bytes(a.rotary_dim)) return "rotary_dim is larger than the planned shape's dims[3]";
  return nullptr;
}
// grid.x: the planner's token tiles; grid.y: the CTAs that share one token's head rows.
dim3 rope_grid(int rows, const ninfer_launch& l) {
  return dim3(static_cast<unsigned>(l.grid_x), static_cast<unsigned>((rows + kWarps - 1) / kWarps));
}

struct HeadNormRopeDef : TokenDefDefaults {
  using Args = ninfer_head_norm_rope_args;
  static constexpr const char* op = NINFER_OP_HEAD_NORM_ROPE;
  static constexpr const char* name = "warp_per_head";
  static constexpr int threads = kThreads;
  static KernelPair kernels() {
    return {"ninfer_head_norm_rope_f32", reinterpret_cast<const void*>(ninfer_head_norm_rope_f32)};
  }
  static int32_t supports(const void*, const ninfer_shape* s) { return rope_shape_fits(s, s->dims[1] + s->dims[2]); }
  static const char* invalid(const Args& a, const ninfer_launch& l) { return rope_args_invalid(a, l); }
  static size_t dynamic_smem(const void*, const ninfer_shape* s) { return table_bytes(s->dims[3]); }
  static dim3 grid(const Args& a, const ninfer_launch& l) { return rope_grid(a.q_heads + a.k_heads, l); }
};

// One variant for every cache dtype, as kv_append's: the pair's f32 / bf16 kernels by the cache
// dtype, the f16 one through kernel().
struct HeadNormRopeAppendDef : TokenDefDefaults {
  using Args = ninfer_head_norm_rope_append_args;
  static constexpr const char* op = NINFER_OP_HEAD_NORM_ROPE_APPEND;
  static constexpr const char* name = "warp_per_head";
  static constexpr int threads = kThreads;
  static constexpr uint32_t dtype_mask = attention::kKvDtypeMask;
  static KernelPair kernels() {
    return {"ninfer_head_norm_rope_append_f32", reinterpret_cast<const void*>(ninfer_head_norm_rope_append_f32),
            "ninfer_head_norm_rope_append_bf16", reinterpret_cast<const void*>(ninfer_head_norm_rope_append_bf16)};
  }
  static int32_t supports(const void*, const ninfer_shape* s) {
    return s->dims[2] > 0 && rope_shape_fits(s, s->dims[1] + 2 * s->dims[2]);
  }
  static int32_t dtype(const Args& a) { return a.append.cache.dtype; }
  static TokenKernel kernel(const Args& a) {
    return a.append.cache.dtype == NINFER_DTYPE_F16
               ? reinterpret_cast<const void*>(ninfer_head_norm_rope_append_f16)
               : nullptr;
  }
  // The cache dtype and layout, the contract's ties between the two argument structs, then
  // head_norm_rope's own checks.
  static const char* invalid(const Args& a, const ninfer_launch& l) {
    if (attention::kv_dtype_index(a.append.cache.dtype) < 0) return "the KV cache must be float32, float16 or bfloat16";
    if (const char* why = ninfer_kv_cache_layout_error(&a.append.cache)) return why;
    if (const char* why = ninfer_head_norm_rope_append_untied(&a)) return why;
    return rope_args_invalid(a.rope, l);
  }
  static size_t dynamic_smem(const void*, const ninfer_shape* s) { return table_bytes(s->dims[3]); }
  static dim3 grid(const Args& a, const ninfer_launch& l) { return rope_grid(a.rope.q_heads + 2 * a.rope.k_heads, l); }
};

} // namespace

int32_t register_head_norm_rope(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<HeadNormRopeDef, HeadNormRopeAppendDef>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
