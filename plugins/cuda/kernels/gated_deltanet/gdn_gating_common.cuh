// What the gdn_gating kernels share (contract: ninfer/abi/ops/gdn_gating.h): the gating
// epilogue, used by the CUDA-core variants (gated_deltanet/gdn_gating.cu) and the tensor-core one
// (gated_deltanet/gdn_gating_mma.cu), so every variant applies the same float32 math to its dot
// products.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ninfer/abi/ops/gdn_gating.h"
#include "ninfer/abi/plugin_abi.h"
#include "common/pointwise_math.cuh"

namespace ninfer::cuda_plugin {

__device__ __forceinline__ float softplus(float z) {
  // Matches torch.nn.functional.softplus (beta 1, threshold 20).
  return z > 20.f ? z : log1pf(expf(z));
}

// g and beta of token t, head h from its two dot products av = x . w_a[h], bv = x . w_b[h].
__device__ __forceinline__ void write_gates(const ninfer_gdn_gating_args& a, int64_t t, int h, float av,
                                            float bv) {
  a.g[t * a.heads + h] = -expf(a.a_log[h]) * softplus(av + a.dt_bias[h]);
  a.beta[t * a.heads + h] = sigmoid(bv);
}

#ifndef __CUDACC_RTC__ // host side
// Registers the tensor-core variant (gated_deltanet/gdn_gating_mma.cu); called by
// register_gdn_gating after the CUDA-core variants.
int32_t register_gdn_gating_mma(const ninfer_registrar* r, char* err, size_t err_len);
#endif

} // namespace ninfer::cuda_plugin
