// attention, prefill form (contract: ninfer/abi/ops/attention.h): flash-attention style.
//
// One CTA takes 32 consecutive tokens (the planner's token tile) of one query head (grid.z)
// and walks the keys of their sequence in tiles of 32 with an online softmax: no score
// matrix exists anywhere, shared memory holds one q tile and one K/V tile. Causality is a
// per-row bound on key positions, so a chunk that starts mid-sequence attends to the earlier
// cache too. A tile whose tokens belong to several sequences (mixed calls, decode batches
// too large for the split-KV decode) is processed one sequence at a time. Query heads of one
// kv head read the same K/V tiles, which they share through L2.
//
// The planner sizes grid.x (token tiles) from the variant's tokens_per_cta; the heads are an
// extra grid dimension the contract adds. The launch is ordinary (not cooperative), so its
// legality does not depend on residency.
#include <cuda_runtime.h>

#include <utility>

#include "../cuda_variant.hpp"
#include "attention_host.hpp"
#include "attention_tile.cuh"

namespace ninfer::cuda_plugin::attention {
namespace {

constexpr int kRows = kPrefillTokensPerCta;

template <int HD>
__device__ void prefill_tiles(const ninfer_attention_args& a, int64_t tb, int64_t te) {
  extern __shared__ __align__(16) unsigned char smem[];
  const Tiles<HD, kRows> tiles(smem);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const ninfer_kv_cache& c = a.cache;
  const int h = blockIdx.z, group = a.heads / c.kv_heads, g = h / group, hd = c.head_dim;
  const ninfer_token_batch& b = a.batch;
  const int64_t ntiles = (te - tb + kRows - 1) / kRows;
  for (int64_t n = blockIdx.x; n < ntiles; n += gridDim.x) {
    const int64_t t0 = tb + (ntiles - 1 - n) * kRows; // latest tokens (the most keys) first
    const int64_t t1 = t0 + kRows < te ? t0 + kRows : te;
    for (int64_t s0 = t0; s0 < t1;) {
      // The tile's tokens of one sequence: [s0, s1), at consecutive positions.
      const int seq = b.token_seq[s0];
      const int64_t seq_end = b.seq_start[seq + 1];
      const int64_t s1 = seq_end < t1 && seq_end > s0 ? seq_end : t1;
      const int slot = b.seq_slot[seq];
      const int last_pos = b.token_pos[s1 - 1];
      const bool ok = in_cache(c, slot, b.token_pos[s0]) && in_cache(c, slot, last_pos);

      int row[kRowsPerWarp], last[kRowsPerWarp];
      bool active[kRowsPerWarp];
      int warp_last = -1;
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        row[i] = warp * kRowsPerWarp + i;
        const int64_t t = t0 + row[i];
        active[i] = t >= s0 && t < s1;
        last[i] = active[i] && ok ? b.token_pos[t] : -1;
        warp_last = max(warp_last, last[i]);
      }
      __syncwarp(); // this warp's lanes are done reading its q rows of the previous segment
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        const float* src = active[i] ? a.q + (t0 + row[i]) * a.q_token_stride + h * a.q_head_stride : nullptr;
        load_q_row<HD>(tiles.q + row[i] * HD, src, hd, a.scale, lane, 32);
      }

      RowState<HD> st;
      st.reset();
      const int kmax = ok ? last_pos : -1;
      const KvRows kv = kv_rows(c, ok ? slot : 0, g);
      for (int key0 = 0; key0 <= kmax; key0 += kKeysPerTile) {
        const int nkeys = kmax + 1 - key0 < kKeysPerTile ? kmax + 1 - key0 : kKeysPerTile;
        __syncthreads(); // every warp is done with the previous K/V tile
        load_kv_tile<HD, kRows, kPrefillThreads>(tiles, kv, key0, nkeys);
        __syncthreads(); // the tile (and every warp's q rows) are in place
        if (warp_last >= key0) attend_tile(st, tiles, row, last, key0, nkeys, lane);
      }
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i)
        if (active[i]) store_row(st, i, a.out + (t0 + row[i]) * a.out_token_stride + static_cast<int64_t>(h) * hd, hd, lane);
      s0 = s1;
    }
  }
}

} // namespace
} // namespace ninfer::cuda_plugin::attention

// Kernel entry points: extern "C" so their cubin names are the symbols of the build-time
// resource table.
#define NINFER_ATTENTION_PREFILL(HD)                                                                         \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::attention::kPrefillThreads)              \
      ninfer_attention_prefill_hd##HD(ninfer_attention_args a, int64_t b, int64_t e, float*) {               \
    ninfer::cuda_plugin::attention::prefill_tiles<HD>(a, b, e);                                              \
  }
NINFER_ATTENTION_PREFILL(64)
NINFER_ATTENTION_PREFILL(128)
NINFER_ATTENTION_PREFILL(256)

namespace ninfer::cuda_plugin::attention {
namespace {

struct PrefillDef {
  int hd;
  const char* name;
  const char* symbol;
  Kernel kernel;
};

const PrefillDef kPrefill[kHeadDimClassCount] = {
    {64, "prefill_hd64", "ninfer_attention_prefill_hd64", ninfer_attention_prefill_hd64},
    {128, "prefill_hd128", "ninfer_attention_prefill_hd128", ninfer_attention_prefill_hd128},
    {256, "prefill_hd256", "ninfer_attention_prefill_hd256", ninfer_attention_prefill_hd256},
};

template <int V>
size_t dyn_smem(const ninfer_shape*) {
  return smem_bytes(kPrefill[V].hd, kRows);
}

template <int V>
size_t workspace(const ninfer_shape* s, int64_t) {
  return workspace_bytes(*s);
}

template <int V>
int32_t supports(const ninfer_shape* s) {
  return basic_shape_ok(*s, kPrefill[V].hd);
}

template <int V>
int32_t launch(const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  const PrefillDef& d = kPrefill[V];
  const auto& a = *static_cast<const ninfer_attention_args*>(args);
  if (int32_t rc = check_args(a, *l, d.hd, d.name, err, err_len); rc != NINFER_OK) return rc;
  if (l->grid_x < 1 || l->grid_y != 1 || a.heads > 65535) {
    std::snprintf(err, err_len, "attention/%s: grid (%d,%d) x %d heads is not a prefill grid (grid.y must be 1, "
                  "heads at most 65535)", d.name, l->grid_x, l->grid_y, a.heads);
    return NINFER_ERR_INVALID_ARGUMENT;
  }
  return launch_kernel(d.kernel, dim3(l->grid_x, 1, a.heads), kPrefillThreads, a, *l, false, stream, d.name, err,
                       err_len);
}

template <int V>
int32_t query(ninfer_kernel_resources* out, char* err, size_t err_len) {
  return query_kernel_attributes(reinterpret_cast<const void*>(kPrefill[V].kernel), kPrefill[V].symbol,
                                 kPrefillThreads, out, err, err_len);
}

template <int V>
int32_t driver_blocks(size_t dyn, int32_t* blocks, char* err, size_t err_len) {
  return query_driver_blocks(reinterpret_cast<const void*>(kPrefill[V].kernel), kPrefillThreads, dyn, blocks, err,
                             err_len);
}

template <int V>
void fill(ninfer_variant& v) {
  v.op = NINFER_OP_ATTENTION;
  v.name = kPrefill[V].name;
  v.exec = NINFER_EXEC_CUDA;
  v.geometry = NINFER_GEOMETRY_TOKEN_TILED;
  v.cooperative = 0;
  v.split_k = 1;
  v.tokens_per_cta = kRows;
  v.dtype_mask = 1u << NINFER_DTYPE_F32;
  v.dynamic_smem_bytes = dyn_smem<V>;
  v.workspace_bytes = workspace<V>;
  v.supports = supports<V>;
  v.launch = launch<V>;
  v.query_loaded_resources = query<V>;
  v.query_driver_blocks_per_sm = driver_blocks<V>;
}

template <int... V>
void fill_all(ninfer_variant* out, std::integer_sequence<int, V...>) {
  (fill<V>(out[V]), ...);
}

} // namespace

int32_t register_attention_prefill(const ninfer_registrar* r, char* err, size_t err_len) {
  static ninfer_variant variants[kHeadDimClassCount];
  fill_all(variants, std::make_integer_sequence<int, kHeadDimClassCount>{});
  for (int i = 0; i < kHeadDimClassCount; ++i) {
    const BuildResource* res = find_build_resource(kPrefill[i].symbol);
    if (!res) {
      std::snprintf(err, err_len, "attention/%s: kernel %s missing from the build resource table", kPrefill[i].name,
                    kPrefill[i].symbol);
      return NINFER_ERR_UNSUPPORTED;
    }
    variants[i].resources = make_resources(*res, kPrefillThreads);
    if (int32_t rc = r->add_variant(r->ctx, &variants[i]); rc != NINFER_OK) return rc;
  }
  return NINFER_OK;
}

} // namespace ninfer::cuda_plugin::attention
