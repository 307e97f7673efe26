// What head_norm_rope_append_attention (contract: ninfer/abi/ops/head_norm_rope_append_attention.h)
// adds to the tensor-core split-KV decode (attention_decode_mma.cuh): the group's q rows, and in
// the chunk that holds the token's own position the new k and v rows, arrive as the projection
// wrote them. The CTA normalises and rotates them itself (head_norm_rope's formulas and angles),
// writes the new K and V rows to the cache, and hands them to the warp whose tile holds that key
// through shared memory, since the cache row is written by this very launch.
//
// Why: in a decode step head_norm_rope_append was a launch of its own between the projection and
// the attention, ~1.1 us per Qwen3-8B layer at context 0 and ~3.4 us at 4,096 keys in the
// session's ablation (docs/performance.md, "Thirteenth session"). Here the rotation's cos/sin
// are computed before the launch wait and the rows take one round trip after it, which the
// attention paid anyway for its q rows.
#pragma once

#include "attention_mma_tile.cuh"
#include "kv_cache_write.cuh"
#include "ninfer/abi/ops/head_norm_rope_append.h"
#include "pointwise_math.cuh"

namespace ninfer::cuda_plugin::attention {

// Shared memory the fold adds after the decode's (decode_mma_smem_bytes): cos and sin of the
// token's angles (HD / 2 each), one float row per warp for the rotation, and the new K and V
// rows as cached (16-bit elements).
NINFER_HD_FN constexpr size_t decode_fold_extra_bytes(int hd) {
  return sizeof(float) * static_cast<size_t>(hd + kDecodeWarps * hd) + 2 * 2 * static_cast<size_t>(hd);
}

template <class E, int HD>
struct FoldSmem {
  float *cs, *sn, *rows; // rows: [kDecodeWarps][HD]
  E *k, *v;
  __device__ explicit FoldSmem(unsigned char* at)
      : cs(reinterpret_cast<float*>(at)), sn(cs + HD / 2), rows(sn + HD / 2),
        k(reinterpret_cast<E*>(rows + kDecodeWarps * HD)), v(k + HD) {}
};

// cos and sin of the rotation at `position`, pair by pair, as head_norm_rope evaluates them.
// Every thread of the CTA calls it; a barrier must follow before they are read.
__device__ inline void fold_angles(const ninfer_head_norm_rope_args& r, int position, float* cs, float* sn) {
  for (int i = threadIdx.x; i < r.rotary_dim / 2; i += blockDim.x)
    rope_sin_cos(position, rope_inv_freq(r.theta, i, r.rotary_dim), &sn[i], &cs[i]);
}

// One head row normalised (RMS over head_dim, scaled by w or 1 + w) and rotated (half-split
// pairs of the first rotary_dim dims), as head_norm_rope computes it: dim lane + 32 u into
// out[u] (0 past head_dim). `row` is the warp's float scratch row. The whole warp calls it.
template <int HD>
__device__ void fold_norm_rope_row(const float* x, const float* weight, const ninfer_head_norm_rope_args& r,
                                   const float* cs, const float* sn, float* row, int lane, float (&out)[HD / 32]) {
  constexpr int kPer = HD / 32;
  const int hd = r.head_dim, half = r.rotary_dim / 2;
  const float offset = r.weight_offset ? 1.f : 0.f;
  float v[kPer], ss = 0.f;
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int d = lane + 32 * u;
    v[u] = d < hd ? x[d] : 0.f;
    ss += v[u] * v[u];
  }
  const float inv = rsqrtf(warp_sum(ss) / hd + r.eps);
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int d = lane + 32 * u;
    if (d < hd) row[d] = v[u] * inv * (offset + weight[d]);
  }
  __syncwarp();
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int d = lane + 32 * u;
    if (d < half) out[u] = row[d] * cs[d] - row[d + half] * sn[d];
    else if (d < 2 * half) out[u] = row[d] * cs[d - half] + row[d - half] * sn[d - half];
    else out[u] = d < hd ? row[d] : 0.f;
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
