// The chunks of one kv head meeting inside a thread block cluster (sm_90 and newer), for the
// tensor-core split-KV decode (attention/decode_mma.cuh). When a launch's clusters are exactly
// the chunks of one (token, kv head) — grid.y = kv_heads x C, cluster (1, C, 1) — each chunk's
// CTA leaves its merged rows (running max, total weight, output row) in its own shared memory,
// the cluster waits at one barrier, and the CTAs read one another's rows through distributed
// shared memory, each CTA finishing a slice of the group's output elements. A second barrier
// keeps every CTA's rows alive until all reads are done.
//
// Why: without a cluster the chunks meet through L2 (partials, a fence, a ticket, and the last
// chunk's merge_row, attention/decode_merge.cuh). A timing probe of the Qwen3-8B decode on the
// H200 put that tail at 3.6 us of the launch's 14.5 us per layer at 4,096 keys
// (docs/performance.md); a cluster barrier and one shared-memory round
// trip between SMs of one GPC replace it.
#pragma once

#include <cstdint>

#include "attention/mma.cuh"
#include "attention/tile.cuh"

namespace ninfer::cuda_plugin::attention {

// The largest cluster the launch asks for (non-portable above 8; the host checks the device
// can place it) and the largest group whose rows fit the q tile's space (16 rows of HD + 8
// 16-bit elements hold group x (HD + 2) floats for HD 128 up to a group of 8).
constexpr int kDecodeMaxClusterChunks = 16;
constexpr int kDecodeClusterMaxGroup = 8;

// Floats of one row's merged state in a CTA's cluster rows: max (log2 domain), total, output.
NINFER_HD_FN constexpr int cluster_row_floats(int hd) { return hd + 2; }

// CTAs in this CTA's cluster: 1 without a cluster launch, and before sm_90. A CTA's rank in its
// cluster is blockIdx.y % that count (clusters are (1, C, 1) and grid.y a multiple of C).
__device__ __forceinline__ int cluster_ctas() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  return static_cast<int>(n);
#else
  return 1;
#endif
}

// Every thread of every CTA of the cluster: the writes before it are visible to the reads after.
__device__ __forceinline__ void cluster_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}

// The float at shared address `at` (this CTA's view) in the shared memory of cluster CTA `rank`.
__device__ __forceinline__ float cluster_load(uint32_t at, int rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t remote;
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(at), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
  return v;
#else
  return 0.f;
#endif
}

// The merge of the cluster's chunks of kv head kh for token t: `rows` is this CTA's cluster rows
// ([group][cluster_row_floats]), written by every CTA before the barrier this function starts
// with. CTA `rank` of `ctas` finishes a slice of the group's group x HD output elements, whole
// warps of consecutive dims of one row: lane j reads chunk j's max and total, the warp forms the
// chunks' weights with shuffles, and each lane adds its dim over the chunks. A chunk that saw no
// key has weight 0; a row no chunk saw (a token outside the cache) gets NaN, as in the other
// merges. Every thread of every CTA of the cluster calls it.
template <int HD>
__device__ void cluster_merge(const ninfer_attention_args& a, const float* rows, int64_t t, int kh, int ctas,
                              int rank) {
  static_assert(HD % 32 == 0, "a warp's 32 elements lie in one row");
  const int group = a.heads / a.cache.kv_heads, hd = a.cache.head_dim, n = group * HD, lane = threadIdx.x & 31;
  const int per = ((n + ctas - 1) / ctas + 31) / 32 * 32, end = min(n, (rank + 1) * per);
  cluster_sync();
  for (int e = rank * per + static_cast<int>(threadIdx.x); e < end; e += blockDim.x) { // whole warps
    const int r = e / HD, d = e % HD;
    const uint32_t row = mma::smem_addr(rows + r * cluster_row_floats(HD));
    const float m = lane < ctas ? cluster_load(row, lane) : -INFINITY;
    const float l = lane < ctas ? cluster_load(row + 4, lane) : 0.f;
    float o[kDecodeMaxClusterChunks];
#pragma unroll
    for (int j = 0; j < kDecodeMaxClusterChunks; ++j) o[j] = j < ctas ? cluster_load(row + 4 * (2 + d), j) : 0.f;
    const float mx = warp_max(l > 0.f ? m : -INFINITY);
    const float w = l > 0.f ? exp2f(m - mx) : 0.f;
    const float total = warp_sum(w * l);
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < kDecodeMaxClusterChunks; ++j) acc += __shfl_sync(kFullMask, w, j) * o[j];
    if (d < hd)
      a.out[t * a.out_token_stride + static_cast<int64_t>(kh * group + r) * hd + d] =
          total > 0.f ? acc / total : __int_as_float(0x7fc00000);
  }
  cluster_sync(); // no CTA leaves (freeing its rows) while another still reads them
}

} // namespace ninfer::cuda_plugin::attention
