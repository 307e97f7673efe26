// copy_rows: rows of 32-bit words copied at indices held on the device (contract:
// ninfer/abi/ops/copy_rows.h). Speculative rounds settle their sequences with it: a Gated
// DeltaNet layer's recurrent state per slot (Qwen3.5-27B: 786,432 words) chosen by the row the
// round accepted.
//
// A row is cut into slices of about kSliceWords words, a CTA each (grid.y), so a handful of
// large rows (the states of a few slots: 192 slices of a 27B layer's 3 MB) spreads over the
// whole device whatever its size; a thread moves 4-word vectors where the row's start and
// stride allow, else single words. A call of several groups (every Gated DeltaNet layer's state
// of one kind) takes a grid.z slot per group. The indices are written by the op before
// (draft_accept): they are read after the launch wait, like everything else.
#include <cuda_runtime.h>

#include <cstdint>

#include "ninfer/abi/ops/copy_rows.h"
#include "common/grid_dependency.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include "../../cuda_variant.hpp"
#include "pointwise/families.hpp"
#include "common/token_variant.cuh"
#endif

namespace ninfer::cuda_plugin {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kSliceWords = 4096; // 16 KB a CTA: four 16-byte moves per thread
constexpr int64_t kMaxSlices = 65535; // grid.y's limit
constexpr int64_t kMaxGroups = 65535; // grid.z's limit

__device__ void copy_rows(const ninfer_copy_rows_args& a, int64_t begin, int64_t end) {
  const int64_t len = (a.width + gridDim.y - 1) / gridDim.y;
  const int64_t lo = min(a.width, static_cast<int64_t>(blockIdx.y) * len);
  const int64_t hi = min(a.width, lo + len);
  const bool grouped = a.groups > 1;
  uint32_t* const dst_base = static_cast<uint32_t*>(grouped ? a.dst_groups[blockIdx.z] : a.dst);
  const uint32_t* const src_base = static_cast<const uint32_t*>(grouped ? a.src_groups[blockIdx.z] : a.src);
  for (int64_t r = begin + blockIdx.x; r < end; r += gridDim.x) {
    const int64_t d = a.dst_index ? a.dst_index[r] : r, s = a.src_index ? a.src_index[r] : r;
    uint32_t* dst = dst_base + d * a.dst_stride;
    const uint32_t* src = src_base + s * a.src_stride;
    const bool vec = ((reinterpret_cast<uintptr_t>(dst + lo) | reinterpret_cast<uintptr_t>(src + lo)) & 15) == 0;
    int64_t i = lo;
    if (vec) {
      const int64_t n4 = (hi - lo) / 4;
      for (int64_t v = threadIdx.x; v < n4; v += blockDim.x)
        reinterpret_cast<uint4*>(dst + lo)[v] = reinterpret_cast<const uint4*>(src + lo)[v];
      i = lo + 4 * n4;
    }
    for (int64_t j = i + threadIdx.x; j < hi; j += blockDim.x) dst[j] = src[j];
  }
}

} // namespace
} // namespace ninfer::cuda_plugin

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kThreads)
    ninfer_copy_rows(ninfer_copy_rows_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::copy_rows(a, b, e);
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

struct CopyRowsDef : TokenDefDefaults {
  using Args = ninfer_copy_rows_args;
  static constexpr const char* op = NINFER_OP_COPY_ROWS;
  static constexpr const char* name = "row_slices";
  static constexpr int threads = kThreads;
  static KernelPair kernels() {
    return {"ninfer_copy_rows", reinterpret_cast<const void*>(ninfer_copy_rows), nullptr, nullptr};
  }
  static int32_t supports(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0; }
  // The planner's rows on x; the row's slices on y, from its width; the groups on z.
  static dim3 grid(const Args& a, const ninfer_launch& l) {
    const int64_t slices = (a.width + kSliceWords - 1) / kSliceWords;
    return dim3(static_cast<unsigned>(l.grid_x), static_cast<unsigned>(slices < kMaxSlices ? slices : kMaxSlices),
                static_cast<unsigned>(a.groups > 1 ? a.groups : 1));
  }
  static const char* invalid(const Args& a, const ninfer_launch&) {
    if (a.dst_stride < a.width || a.src_stride < a.width) return "strides narrower than the rows";
    if (a.groups > 1 && (!a.dst_groups || !a.src_groups)) return "groups without both group arrays";
    if (a.groups > kMaxGroups) return "more groups than grid.z holds (65,535)";
    return nullptr;
  }
};

} // namespace

int32_t register_copy_rows(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<CopyRowsDef>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
