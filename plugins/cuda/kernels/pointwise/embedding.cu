// embedding: gather rows of the token embedding table, converted to float32 (contract:
// ninfer/abi/ops/embedding.h).
//
// A token's row is split over kRowSlices CTAs (grid.y = split_k) so a one-token decode step
// still spreads its gather over several SMs. An id outside [0, vocab) cannot be reported from
// the device: its row is written as NaN, so the mistake shows in every later result instead of
// reading past the table. Callers validate ids first, as the contract asks.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "ninfer/abi/ops/embedding.h"
#include "common/grid_dependency.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include "../../cuda_variant.hpp"
#include "pointwise/families.hpp"
#include "common/token_variant.cuh"
#endif

namespace ninfer::cuda_plugin {
namespace {

constexpr int kThreads = 256;
constexpr int kRowSlices = 4;

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T>
__device__ void gather_rows(const ninfer_embedding_args& a, int64_t begin, int64_t end) {
  const int64_t len = (a.dim + gridDim.y - 1) / gridDim.y;
  const int64_t lo = min(static_cast<int64_t>(a.dim), blockIdx.y * len);
  const int64_t hi = min(static_cast<int64_t>(a.dim), lo + len);
  const T* table = static_cast<const T*>(a.table);
  for (int64_t t = begin + blockIdx.x; t < end; t += gridDim.x) {
    const int32_t id = a.ids[t];
    float* out = a.out + t * a.out_row_stride;
    if (id < 0 || id >= a.vocab) {
      for (int64_t i = lo + threadIdx.x; i < hi; i += kThreads) out[i] = __int_as_float(0x7fc00000); // NaN
      continue;
    }
    const T* row = table + static_cast<int64_t>(id) * a.dim;
    for (int64_t i = lo + threadIdx.x; i < hi; i += kThreads) out[i] = widen(row[i]);
  }
}

} // namespace
} // namespace ninfer::cuda_plugin

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kThreads)
    ninfer_embedding_f32(ninfer_embedding_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::gather_rows<float>(a, b, e);
}
extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kThreads)
    ninfer_embedding_bf16(ninfer_embedding_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::gather_rows<__nv_bfloat16>(a, b, e);
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

struct EmbeddingDef : TokenDefDefaults {
  using Args = ninfer_embedding_args;
  static constexpr const char* op = NINFER_OP_EMBEDDING;
  static constexpr const char* name = "row_slices";
  static constexpr int threads = kThreads;
  static constexpr int split_k = kRowSlices;
  static constexpr uint32_t dtype_mask = kF32OrBf16Mask;
  static KernelPair kernels() {
    return {"ninfer_embedding_f32", reinterpret_cast<const void*>(ninfer_embedding_f32), "ninfer_embedding_bf16",
            reinterpret_cast<const void*>(ninfer_embedding_bf16)};
  }
  static int32_t dtype(const Args& a) { return a.dtype; }
  static int32_t supports(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0; }
  static const char* invalid(const Args& a, const ninfer_launch&) {
    return a.dtype == NINFER_DTYPE_F32 || a.dtype == NINFER_DTYPE_BF16 ? nullptr : "table dtype must be F32 or BF16";
  }
};

} // namespace

int32_t register_embedding(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<EmbeddingDef>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
