// linear on int4 weights, 1-4 tokens: gemv_int4_lean (the kernel and its rules:
// linear/gemv_int4_lean.cuh). One kernel per scale dtype, zeros or not, and group form (_g128:
// one step per group; _groups: a group of several steps, or one per row).
#include "linear/gemv_int4_lean.cuh"

#define NINFER_GEMV_INT4_LEAN(SD_NAME, SD, ZEROS, ZNAME, G128, GNAME)                                           \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::gemv_int4_lean::kThreads,                   \
                                               ninfer::cuda_plugin::gemv_int4_lean::kMinCtasPerSm)              \
      ninfer_linear_gemv_int4_lean_##SD_NAME##ZNAME##GNAME(ninfer::cuda_plugin::quant::Args a, long long b,    \
                                                             long long e,                                       \
                                                             ninfer::cuda_plugin::gemv_int4_lean::Split s) {    \
    ninfer::cuda_plugin::gemv_int4_lean::gemv<SD, ZEROS, G128, false>(a, b, e, s, {});                         \
  }
#define NINFER_GEMV_INT4_LEAN_FORMS(SD_NAME, SD)                  \
  NINFER_GEMV_INT4_LEAN(SD_NAME, SD, false, , true, _g128)        \
  NINFER_GEMV_INT4_LEAN(SD_NAME, SD, false, , false, _groups)     \
  NINFER_GEMV_INT4_LEAN(SD_NAME, SD, true, _zeros, true, _g128)   \
  NINFER_GEMV_INT4_LEAN(SD_NAME, SD, true, _zeros, false, _groups)
NINFER_GEMV_INT4_LEAN_FORMS(f32, NINFER_DTYPE_F32)
NINFER_GEMV_INT4_LEAN_FORMS(bf16, NINFER_DTYPE_BF16)
NINFER_GEMV_INT4_LEAN_FORMS(f16, NINFER_DTYPE_F16)

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

namespace lean = gemv_int4_lean;

struct GemvInt4LeanDef : lean::DefBase {
  static const QuantKernel* kernels() {
#define NINFER_GEMV_INT4_LEAN_KERNEL(NAME) {#NAME, reinterpret_cast<const void*>(NAME)}
#define NINFER_GEMV_INT4_LEAN_KERNELS(SD)                                              \
  NINFER_GEMV_INT4_LEAN_KERNEL(ninfer_linear_gemv_int4_lean_##SD##_g128),              \
      NINFER_GEMV_INT4_LEAN_KERNEL(ninfer_linear_gemv_int4_lean_##SD##_groups),        \
      NINFER_GEMV_INT4_LEAN_KERNEL(ninfer_linear_gemv_int4_lean_##SD##_zeros_g128),    \
      NINFER_GEMV_INT4_LEAN_KERNEL(ninfer_linear_gemv_int4_lean_##SD##_zeros_groups)
    static const QuantKernel k[kernel_count] = {NINFER_GEMV_INT4_LEAN_KERNELS(f32), NINFER_GEMV_INT4_LEAN_KERNELS(bf16),
                                                NINFER_GEMV_INT4_LEAN_KERNELS(f16)};
#undef NINFER_GEMV_INT4_LEAN_KERNELS
#undef NINFER_GEMV_INT4_LEAN_KERNEL
    return k;
  }
  // dims[2]: the planning group (linear.h).
  static int32_t supports(const void*, const ninfer_shape* s) {
    return takes(s->tokens, s->dims[0], s->dims[1], s->dims[2]);
  }
  static const char* invalid(const ninfer_linear_args& a) { return invalid_weights(a); }
  static lean::Split extra(const ninfer_linear_args& a, const ninfer_launch& l) { return split(a, l); }
};

} // namespace

int32_t register_linear_gemv_int4_lean(const ninfer_registrar* r, char* err, size_t err_len) {
  static ninfer_variant storage;
  return QuantLinearVariant<GemvInt4LeanDef>::add(r, storage, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
