// draft_accept: greedy verification of a speculative round's drafts (contract:
// ninfer/abi/ops/draft_accept.h). A sequence has at most a handful of drafts, so one thread per
// sequence walks them; the launch exists so that acceptance never goes through the host.
#include <cuda_runtime.h>

#include <cstdint>

#include "ninfer/abi/ops/draft_accept.h"
#include "common/grid_dependency.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include "../../cuda_variant.hpp"
#include "common/token_variant.cuh"
#endif

namespace ninfer::cuda_plugin {
namespace {

constexpr int kThreads = 32;

__device__ void accept(const ninfer_draft_accept_args& a, int64_t begin, int64_t end) {
  const int64_t D = static_cast<int64_t>(a.drafts) + 1;
  for (int64_t i = begin + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < end;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t* proposed = a.ids + i * D + 1;
    const int32_t* target = a.picks + i * D;
    int32_t n = 0;
    while (n < a.drafts && target[n] >= 0 && proposed[n] == target[n]) ++n;
    a.accepted[i] = n;
    if (a.keep_row) a.keep_row[i] = static_cast<int32_t>(i * D + n);
  }
}

} // namespace
} // namespace ninfer::cuda_plugin

extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::kThreads)
    ninfer_draft_accept(ninfer_draft_accept_args a, int64_t b, int64_t e) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  ninfer::cuda_plugin::accept(a, b, e);
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

struct DraftAcceptDef : TokenDefDefaults {
  using Args = ninfer_draft_accept_args;
  static constexpr const char* op = NINFER_OP_DRAFT_ACCEPT;
  static constexpr const char* name = "thread_per_sequence";
  static constexpr int threads = kThreads;
  static constexpr int tokens_per_cta = kThreads;
  static KernelPair kernels() {
    return {"ninfer_draft_accept", reinterpret_cast<const void*>(ninfer_draft_accept), nullptr, nullptr};
  }
  static int32_t supports(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] >= 1; }
};

} // namespace

int32_t register_draft_accept(const ninfer_registrar* r, char* err, size_t err_len) {
  return add_token_variants<DraftAcceptDef>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
