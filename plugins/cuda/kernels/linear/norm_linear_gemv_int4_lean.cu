// norm_linear on int4 weights, 1-4 tokens: gemv_int4_lean (linear/gemv_int4_lean.cuh) with the
// block's RMS norm applied to x as each CTA stages it, and gated, SwiGLU formed in the CTA. A
// quantized 27B decode step otherwise pays a separate rms_norm launch before each of its 129
// normed projections and a silu_mul after each MLP, and the norm's one-CTA launch holds the next
// projection's launch back (rms_norm ~7.8 us and silu_mul ~4 us each on an H100, ncu).
#include "linear/gemv_int4_lean.cuh"

#include "ninfer/abi/ops/norm_linear.h"

#define NINFER_NORM_GEMV_INT4_LEAN(SD_NAME, SD, ZEROS, ZNAME, G128, GNAME)                                          \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::gemv_int4_lean::kThreads,                       \
                                               ninfer::cuda_plugin::gemv_int4_lean::kMinCtasPerSm)                  \
      ninfer_norm_linear_gemv_int4_lean_##SD_NAME##ZNAME##GNAME(ninfer::cuda_plugin::quant::Args a, long long b,   \
                                                                  long long e,                                      \
                                                                  ninfer::cuda_plugin::gemv_int4_lean::NormSplit s) { \
    ninfer::cuda_plugin::gemv_int4_lean::gemv<SD, ZEROS, G128, true>(a, b, e, s.split, s.norm);                    \
  }
#define NINFER_NORM_GEMV_INT4_LEAN_FORMS(SD_NAME, SD)                  \
  NINFER_NORM_GEMV_INT4_LEAN(SD_NAME, SD, false, , true, _g128)        \
  NINFER_NORM_GEMV_INT4_LEAN(SD_NAME, SD, false, , false, _groups)     \
  NINFER_NORM_GEMV_INT4_LEAN(SD_NAME, SD, true, _zeros, true, _g128)   \
  NINFER_NORM_GEMV_INT4_LEAN(SD_NAME, SD, true, _zeros, false, _groups)
NINFER_NORM_GEMV_INT4_LEAN_FORMS(f32, NINFER_DTYPE_F32)
NINFER_NORM_GEMV_INT4_LEAN_FORMS(bf16, NINFER_DTYPE_BF16)
NINFER_NORM_GEMV_INT4_LEAN_FORMS(f16, NINFER_DTYPE_F16)

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

namespace lean = gemv_int4_lean;

struct NormGemvInt4LeanDef : lean::DefBase {
  using OpArgs = ninfer_norm_linear_args;
  static constexpr const char* op = NINFER_OP_NORM_LINEAR;
  static const QuantKernel* kernels() {
#define NINFER_NORM_GEMV_INT4_LEAN_KERNEL(NAME) {#NAME, reinterpret_cast<const void*>(NAME)}
#define NINFER_NORM_GEMV_INT4_LEAN_KERNELS(SD)                                              \
  NINFER_NORM_GEMV_INT4_LEAN_KERNEL(ninfer_norm_linear_gemv_int4_lean_##SD##_g128),         \
      NINFER_NORM_GEMV_INT4_LEAN_KERNEL(ninfer_norm_linear_gemv_int4_lean_##SD##_groups),   \
      NINFER_NORM_GEMV_INT4_LEAN_KERNEL(ninfer_norm_linear_gemv_int4_lean_##SD##_zeros_g128), \
      NINFER_NORM_GEMV_INT4_LEAN_KERNEL(ninfer_norm_linear_gemv_int4_lean_##SD##_zeros_groups)
    static const QuantKernel k[kernel_count] = {NINFER_NORM_GEMV_INT4_LEAN_KERNELS(f32),
                                                NINFER_NORM_GEMV_INT4_LEAN_KERNELS(bf16),
                                                NINFER_NORM_GEMV_INT4_LEAN_KERNELS(f16)};
#undef NINFER_NORM_GEMV_INT4_LEAN_KERNELS
#undef NINFER_NORM_GEMV_INT4_LEAN_KERNEL
    return k;
  }
  // dims[2]: gated, dims[3]: the planning group (norm_linear.h); gated takes an even N.
  static int32_t supports(const void*, const ninfer_shape* s) {
    return (s->dims[2] == 0 || s->dims[1] % 2 == 0) && takes(s->tokens, s->dims[0], s->dims[1], s->dims[3]);
  }
  static const char* invalid(const ninfer_norm_linear_args& a) {
    if (a.gated && a.out_features % 2 != 0) return "gated needs an even out_features";
    return invalid_weights(a);
  }
  static lean::NormSplit extra(const ninfer_norm_linear_args& a, const ninfer_launch& l) {
    const lean::Norm norm{a.norm_w, a.eps, a.norm_offset ? 1.f : 0.f, a.normed, a.normed_row_stride, a.gated};
    return {split(a, l), norm};
  }
};

} // namespace

int32_t register_norm_linear_gemv_int4_lean(const ninfer_registrar* r, char* err, size_t err_len) {
  static ninfer_variant storage;
  return QuantLinearVariant<NormGemvInt4LeanDef>::add(r, storage, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
