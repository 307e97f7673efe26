// kv_append: write the new K and V rows of a batch's tokens into their slots of the KV cache
// (contract: ninfer/abi/ops/kv_append.h). The cache is float32, float16 or bfloat16; the float32
// rows are rounded to nearest even on the way in (one kernel per cache dtype, one variant).
//
// One CTA per token (grid-stride over the launch's tokens) copies the token's kv_heads x
// head_dim K row and V row. A slot or position outside the cache cannot be reported from the
// device; such a token is skipped rather than written out of bounds. Callers validate the
// batch first, as the contract asks.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "common/grid_dependency.cuh"
#include "attention/shapes.hpp"
#include "pointwise/kv_cache_write.cuh"
#include "ninfer/abi/ops/kv_append.h"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include "../../cuda_variant.hpp"
#include "pointwise/families.hpp"
#include "common/token_variant.cuh"
#endif

namespace ninfer::cuda_plugin {
namespace {

constexpr int kThreads = 256;

template <class E>
__device__ void append_rows(const ninfer_kv_append_args& a, int64_t begin, int64_t end) {
  const ninfer_kv_cache& c = a.cache;
  const int64_t row = static_cast<int64_t>(c.kv_heads) * c.head_dim;
  E* const ck = static_cast<E*>(c.k);
  E* const cv = static_cast<E*>(c.v);
  for (int64_t t = begin + blockIdx.x; t < end; t += gridDim.x) {
    const int64_t at = kv_token_row(c, a.batch, t);
    if (at < 0) continue;
    const float* k = a.k + t * a.k_token_stride;
    const float* v = a.v + t * a.v_token_stride;
    for (int64_t i = threadIdx.x; i < row; i += kThreads) {
      to_cache(k[i], ck[at + i]);
      to_cache(v[i], cv[at + i]);
    }
  }
}

} // namespace
} // namespace ninfer::cuda_plugin

#define NINFER_KV_APPEND(NAME, E)                                                                            \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kThreads)                                \
      ninfer_kv_append_##NAME(ninfer_kv_append_args a, int64_t b, int64_t e) {                               \
    ninfer::cuda_plugin::grid_dependency_prologue();                                                         \
    ninfer::cuda_plugin::append_rows<E>(a, b, e);                                                            \
  }
NINFER_KV_APPEND(f32, float)
NINFER_KV_APPEND(f16, __half)
NINFER_KV_APPEND(bf16, __nv_bfloat16)

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

// One variant for every cache dtype: the pair's f32 / bf16 kernels by the cache dtype (dtype()),
// the f16 one through kernel().
struct KvAppendDef : TokenDefDefaults {
  using Args = ninfer_kv_append_args;
  static constexpr const char* op = NINFER_OP_KV_APPEND;
  static constexpr const char* name = "rows";
  static constexpr int threads = kThreads;
  static constexpr uint32_t dtype_mask = attention::kKvDtypeMask;
  static KernelPair kernels() {
    return {"ninfer_kv_append_f32", reinterpret_cast<const void*>(ninfer_kv_append_f32), "ninfer_kv_append_bf16",
            reinterpret_cast<const void*>(ninfer_kv_append_bf16)};
  }
  static int32_t supports(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0; }
  static int32_t dtype(const Args& a) { return a.cache.dtype; }
  static TokenKernel kernel(const Args& a) {
    return a.cache.dtype == NINFER_DTYPE_F16 ? reinterpret_cast<const void*>(ninfer_kv_append_f16) : nullptr;
  }
  static const char* invalid(const Args& a, const ninfer_launch&) {
    if (attention::kv_dtype_index(a.cache.dtype) < 0) return "the KV cache must be float32, float16 or bfloat16";
    return ninfer_kv_cache_layout_error(&a.cache);
  }
};

} // namespace

int32_t register_kv_append(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<KvAppendDef>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
