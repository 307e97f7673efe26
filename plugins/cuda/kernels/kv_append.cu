// kv_append: write the new K and V rows of a batch's tokens into their slots of the KV cache
// (contract: ninfer/abi/ops/kv_append.h).
//
// One CTA per token (grid-stride over the launch's tokens) copies the token's kv_heads x
// head_dim K row and V row. A slot or position outside the cache cannot be reported from the
// device; such a token is skipped rather than written out of bounds. Callers validate the
// batch first, as the contract asks.
#include <cuda_runtime.h>

#include "../cuda_variant.hpp"
#include "ninfer/abi/ops/kv_append.h"
#include "pointwise_families.hpp"
#include "token_variant.cuh"
#include "grid_dependency.cuh"

namespace ninfer::cuda_plugin {
namespace {

constexpr int kThreads = 256;

__device__ void append_rows(const ninfer_kv_append_args& a, int64_t begin, int64_t end) {
  const ninfer_kv_cache& c = a.cache;
  const int64_t row = static_cast<int64_t>(c.kv_heads) * c.head_dim;
  for (int64_t t = begin + blockIdx.x; t < end; t += gridDim.x) {
    const int32_t slot = a.batch.seq_slot[a.batch.token_seq[t]];
    const int32_t pos = a.batch.token_pos[t];
    if (slot < 0 || slot >= c.slots || pos < 0 || pos >= c.capacity) continue;
    const int64_t at = (static_cast<int64_t>(slot) * c.capacity + pos) * row;
    const float* k = a.k + t * a.k_token_stride;
    const float* v = a.v + t * a.v_token_stride;
    for (int64_t i = threadIdx.x; i < row; i += kThreads) {
      c.k[at + i] = k[i];
      c.v[at + i] = v[i];
    }
  }
}

} // namespace
} // namespace ninfer::cuda_plugin

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kThreads)
    ninfer_kv_append_f32(ninfer_kv_append_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::append_rows(a, b, e);
}

namespace ninfer::cuda_plugin {
namespace {

struct KvAppendDef : TokenDefDefaults {
  using Args = ninfer_kv_append_args;
  static constexpr const char* op = NINFER_OP_KV_APPEND;
  static constexpr const char* name = "rows";
  static constexpr int threads = kThreads;
  static KernelPair kernels() { return {"ninfer_kv_append_f32", reinterpret_cast<const void*>(ninfer_kv_append_f32)}; }
  static int32_t supports(const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0; }
  static const char* invalid(const Args& a, const ninfer_launch&) {
    return a.cache.dtype == NINFER_DTYPE_F32 ? nullptr : "the KV cache must be F32 in this version";
  }
};

} // namespace

int32_t register_kv_append(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<KvAppendDef>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
