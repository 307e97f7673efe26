// What head_norm_rope_append_attention (contract: ninfer/abi/ops/head_norm_rope_append_attention.h)
// adds to the tensor-core split-KV decode (attention/decode_mma.cuh): the group's q rows, and in
// the chunk that holds the token's own position the new k and v rows, arrive as the projection
// wrote them. The CTA normalises and rotates them itself (head_norm_rope's formulas and angles),
// writes the new K and V rows to the cache, and hands them to the warp whose tile holds that key
// through shared memory, since the cache row is written by this very launch.
//
// Why: in a decode step head_norm_rope_append alone is a launch between the projection and the
// attention, ~1.1 us per Qwen3-8B layer at context 0 and ~3.4 us at 4,096 keys in an ablation
// on the H200 (docs/performance.md). Here the rotation's cos/sin
// are computed before the launch wait and the rows take one round trip after it, which the
// attention paid anyway for its q rows.
#pragma once

#include "attention/mma_tile.cuh"
#include "pointwise/kv_cache_write.cuh"
#include "ninfer/abi/ops/head_norm_rope_append.h"
#include "common/pointwise_math.cuh"

namespace ninfer::cuda_plugin::attention {

// Shared memory the fold adds after the decode's (decode_mma_smem_bytes): cos and sin of the
// token's angles (HD / 2 each), the q and k norm weights with the weight offset added (HD each),
// one float row per warp for a rotation whose pairs are not in one lane, and the new K and V rows
// as cached (16-bit elements).
NINFER_HD_FN constexpr size_t decode_fold_extra_bytes(int hd) {
  return sizeof(float) * static_cast<size_t>(3 * hd + kDecodeWarps * hd) + 2 * 2 * static_cast<size_t>(hd);
}

template <class E, int HD>
struct FoldSmem {
  float *cs, *sn, *wq, *wk, *rows; // rows: [kDecodeWarps][HD]
  E *k, *v;
  __device__ explicit FoldSmem(unsigned char* at)
      : cs(reinterpret_cast<float*>(at)), sn(cs + HD / 2), wq(sn + HD / 2), wk(wq + HD), rows(wk + HD),
        k(reinterpret_cast<E*>(rows + kDecodeWarps * HD)), v(k + HD) {}
};

// What the fold needs before the launch wait (common/grid_dependency.cuh): cos and sin of the
// rotation at `position`, pair by pair, as head_norm_rope evaluates them, and the norm weights
// (weights are never written by a step; 0 past head_dim). Every thread of the CTA calls it; a
// barrier must follow before they are read.
template <class E, int HD>
__device__ void fold_prepare(const ninfer_head_norm_rope_args& r, int position, const FoldSmem<E, HD>& fs) {
  for (int i = threadIdx.x; i < r.rotary_dim / 2; i += blockDim.x)
    rope_sin_cos(position, rope_inv_freq(r.theta, i, r.rotary_dim), &fs.sn[i], &fs.cs[i]);
  const float offset = r.weight_offset ? 1.f : 0.f;
  for (int d = threadIdx.x; d < HD; d += blockDim.x) {
    const bool in = d < r.head_dim;
    fs.wq[d] = in ? offset + __ldg(r.q_weight + d) : 0.f;
    fs.wk[d] = in ? offset + __ldg(r.k_weight + d) : 0.f;
  }
}

// The rotation when every pair (d, d + half) lies in one lane, half = 32 H: dims lane + 32 u of
// n rotated into out, in registers.
template <int HD, int H>
__device__ __forceinline__ void rotate_pairs(const float (&n)[HD / 32], const float* cs, const float* sn, int lane,
                                             float (&out)[HD / 32]) {
#pragma unroll
  for (int u = 0; u < HD / 32; ++u) {
    const int d = lane + 32 * u;
    if (u < H) out[u] = n[u] * cs[d] - n[u + H] * sn[d];
    else if (u < 2 * H) out[u] = n[u] * cs[d - 32 * H] + n[u - H] * sn[d - 32 * H];
    else out[u] = n[u];
  }
}

// rotate_pairs for the run-time H = hw (1 <= hw <= HD / 64); false when no instance matches.
template <int HD, int H = 1>
__device__ __forceinline__ bool rotate_in_lane(int hw, const float (&n)[HD / 32], const float* cs, const float* sn,
                                               int lane, float (&out)[HD / 32]) {
  if (hw == H) {
    rotate_pairs<HD, H>(n, cs, sn, lane, out);
    return true;
  }
  if constexpr (2 * (H + 1) <= HD / 32) return rotate_in_lane<HD, H + 1>(hw, n, cs, sn, lane, out);
  return false;
}

// One head row normalised (RMS over head_dim, scaled by w: fold_prepare's offset weights) and
// rotated (half-split pairs of the first rotary_dim dims), as head_norm_rope computes it: dim
// lane + 32 u into out[u] (0 past head_dim). Qwen3's full rotation (half a multiple of 32) stays
// in registers; other rotary widths exchange partners through `row`, the warp's float scratch
// row. The whole warp calls it.
template <int HD>
__device__ void fold_norm_rope_row(const float* x, const float* w, const ninfer_head_norm_rope_args& r,
                                   const float* cs, const float* sn, float* row, int lane, float (&out)[HD / 32]) {
  constexpr int kPer = HD / 32;
  const int hd = r.head_dim, half = r.rotary_dim / 2;
  float v[kPer], ss = 0.f;
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int d = lane + 32 * u;
    v[u] = d < hd ? x[d] : 0.f;
    ss += v[u] * v[u];
  }
  const float inv = rsqrtf(warp_sum(ss) / hd + r.eps);
#pragma unroll
  for (int u = 0; u < kPer; ++u) v[u] = v[u] * inv * w[lane + 32 * u];
  if (half % 32 == 0 && rotate_in_lane<HD>(half / 32, v, cs, sn, lane, out)) return;
#pragma unroll
  for (int u = 0; u < kPer; ++u) row[lane + 32 * u] = v[u];
  __syncwarp();
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int d = lane + 32 * u;
    if (d < half) out[u] = row[d] * cs[d] - row[d + half] * sn[d];
    else if (d < 2 * half) out[u] = row[d] * cs[d - half] + row[d - half] * sn[d - half];
    else out[u] = row[d];
  }
  __syncwarp(); // the row is rewritten by the warp's next task
}

// Copies the staged new K and V rows into row j of the warp's tiles. The whole warp calls it,
// after its tile copy has landed (the copy skipped that row).
template <class E, int HD>
__device__ void fold_place_key(E* ks, E* vs, const FoldSmem<E, HD>& fs, int j, int lane) {
  constexpr int P = mma_pitch(HD);
  for (int d = lane; d < HD; d += 32) {
    ks[j * P + d] = fs.k[d];
    vs[j * P + d] = fs.v[d];
  }
  __syncwarp();
}

} // namespace ninfer::cuda_plugin::attention
