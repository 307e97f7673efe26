// linear on the host (contract: ninfer/abi/ops/linear.h): picks the kernel built for the
// best instruction set this CPU has and spreads blocks of weight rows over the thread pool.
#include <algorithm>

#include "cpu_ops.hpp"
#include "host_variant.hpp"
#include "ninfer/abi/ops/linear.h"
#include "parallel.hpp"

namespace ninfer::cpu_plugin {

void linear_kernel_generic(const ninfer_linear_args& a, int64_t t0, int64_t t1, int64_t n0, int64_t n1);
#ifdef NINFER_CPU_AVX2_KERNEL
void linear_kernel_avx2(const ninfer_linear_args& a, int64_t t0, int64_t t1, int64_t n0, int64_t n1);
#endif

namespace {

using Kernel = void (*)(const ninfer_linear_args&, int64_t, int64_t, int64_t, int64_t);

Kernel best_kernel() {
#ifdef NINFER_CPU_AVX2_KERNEL
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return linear_kernel_avx2;
#endif
  return linear_kernel_generic;
}

int32_t supports(const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0 && s->dims[1] > 0; }

int32_t launch(const void* args, const ninfer_launch* l, void*, char*, size_t) {
  const auto& a = *static_cast<const ninfer_linear_args*>(args);
  static const Kernel kernel = best_kernel();
  // Weight rows per block: about 128 KiB of weights, so a block stays in L2 while every token
  // of the launch streams past it.
  const int64_t row_bytes = static_cast<int64_t>(a.in_features) * (a.w_dtype == NINFER_DTYPE_F32 ? 4 : 2);
  const int64_t block = std::max<int64_t>(2, (128 * 1024 / row_bytes) & ~int64_t{1});
  const int64_t blocks = (a.out_features + block - 1) / block;
  // Token chunks bound the x rows re-read per block.
  constexpr int64_t kTokenChunk = 64;
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t n0 = b * block, n1 = std::min<int64_t>(a.out_features, n0 + block);
      for (int64_t t = l->token_begin; t < l->token_end; t += kTokenChunk)
        kernel(a, t, std::min(l->token_end, t + kTokenChunk), n0, n1);
    }
  });
  return NINFER_OK;
}

} // namespace

int32_t register_linear(const ninfer_registrar* r) {
  static const ninfer_variant v = host_variant(NINFER_OP_LINEAR, "blocked", kF32OrBf16, supports, launch);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
