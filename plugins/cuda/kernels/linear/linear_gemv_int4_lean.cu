// linear on int4 weights (the canonical layout of ninfer/abi/ops/quant_weight.h), 1-16 tokens a
// launch, on the tensor cores: gemv_int4_lean, the lean GEMV of linear/gemv_lean.cuh (its design
// there) on int4 codes. At the copy rate an SM takes in ~26 (H100) to ~37 (H200) int4 codes per
// cycle against the 4 warp instructions it can issue: the step loop issues 1.79-1.90 SASS
// instructions per code and lane with groups of 128 (1.91-2.04 with larger groups; sm_90,
// cuobjdump), for 1 to 4 tokens alike, where gemv_quant_mma's issues 2.7 at one token and its
// split form 6 (docs/quantization.md). A lane decodes 16 code bytes of each of its two rows per
// 128-k step, 11 instructions per 8 codes (gemv_lean::compute_step), with two steps of codes in
// flight at 1-8 tokens; one kernel per scale dtype, zeros or not, group form, tile count and code layout (72).
#include "linear/gemv_lean.cuh"

// One kernel: _<scale dtype><zeros><group form><tiles><layout> (_g128: one step per group;
// _groups: a group of several steps, or one per row; tiles: none for 1-4 tokens, _t8 for 5-8,
// _t16 for 9-16; layout: none for row-major codes, _tiled for NINFER_QUANT_LAYOUT_TILES16).
#define NINFER_GEMV_INT4_LEAN(SD_NAME, SD, ZEROS, ZNAME, G128, GNAME, P, PNAME, CTAS, CT, LNAME)                  \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::gemv_lean::kThreads,                          \
                                               ninfer::cuda_plugin::gemv_lean::CTAS)                              \
      ninfer_linear_gemv_int4_lean_##SD_NAME##ZNAME##GNAME##PNAME##LNAME(                                           \
          ninfer::cuda_plugin::quant::Args a, long long b, long long e, ninfer::cuda_plugin::gemv_lean::Split s) { \
    ninfer::cuda_plugin::gemv_lean::gemv<ninfer::cuda_plugin::gemv_lean::Int4, SD, ZEROS, G128, P, CT>(a, b, e, s); \
  }
#define NINFER_GEMV_INT4_LEAN_FORMS(SD_NAME, SD, P, PNAME, CTAS, CT, LNAME)                  \
  NINFER_GEMV_INT4_LEAN(SD_NAME, SD, false, , true, _g128, P, PNAME, CTAS, CT, LNAME)        \
  NINFER_GEMV_INT4_LEAN(SD_NAME, SD, false, , false, _groups, P, PNAME, CTAS, CT, LNAME)     \
  NINFER_GEMV_INT4_LEAN(SD_NAME, SD, true, _zeros, true, _g128, P, PNAME, CTAS, CT, LNAME)   \
  NINFER_GEMV_INT4_LEAN(SD_NAME, SD, true, _zeros, false, _groups, P, PNAME, CTAS, CT, LNAME)
NINFER_GEMV_LEAN_KERNELS(NINFER_GEMV_INT4_LEAN_FORMS)

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {

template <>
const QuantKernel* gemv_lean::LeanDef<gemv_lean::Int4>::kernels() {
#define NINFER_GEMV_INT4_LEAN_ENTRY(NAME) {#NAME, reinterpret_cast<const void*>(NAME)}
#define NINFER_GEMV_INT4_LEAN_ENTRIES(SD, PNAME, LNAME)                                             \
  NINFER_GEMV_INT4_LEAN_ENTRY(ninfer_linear_gemv_int4_lean_##SD##_g128##PNAME##LNAME),             \
      NINFER_GEMV_INT4_LEAN_ENTRY(ninfer_linear_gemv_int4_lean_##SD##_groups##PNAME##LNAME),       \
      NINFER_GEMV_INT4_LEAN_ENTRY(ninfer_linear_gemv_int4_lean_##SD##_zeros_g128##PNAME##LNAME),   \
      NINFER_GEMV_INT4_LEAN_ENTRY(ninfer_linear_gemv_int4_lean_##SD##_zeros_groups##PNAME##LNAME)
  static const QuantKernel k[kernel_count] = {NINFER_GEMV_LEAN_ENTRIES(NINFER_GEMV_INT4_LEAN_ENTRIES)};
#undef NINFER_GEMV_INT4_LEAN_ENTRIES
#undef NINFER_GEMV_INT4_LEAN_ENTRY
  return k;
}

int32_t register_linear_gemv_int4_lean(const ninfer_registrar* r, char* err, size_t err_len) {
  static ninfer_variant storage;
  return QuantLinearVariant<gemv_lean::LeanDef<gemv_lean::Int4>>::add(r, storage, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
