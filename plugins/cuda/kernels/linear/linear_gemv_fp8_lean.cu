// linear on fp8 e4m3 weights (the canonical layout of ninfer/abi/ops/quant_weight.h: Qwen's FP8
// block checkpoints, their block scales expanded per row), 1-16 tokens a launch, on the tensor
// cores: gemv_fp8_lean, the lean GEMV of linear/gemv_lean.cuh (its design there) on e4m3 codes.
// A code is a byte, so at the copy rate an SM takes in half as many codes per cycle as int4's,
// and sm_89 on converts a pair of them to f16 in one instruction (exact: every e4m3 value is an
// f16): a lane's 32 code bytes of each of its two rows per 128-k step are 16 conversions feeding
// 8 f16 MMAs per column tile, against int4's 44 decode instructions for 8 bf16 MMAs. x goes in as
// f16 hi + lo halves after a power-of-two scale per token (gemv_lean::x_factors: f16's range
// ends at 65504), which the sums undo exactly. One step of codes in flight (32 bytes of each row
// per lane: as many bytes as int4's two); one kernel per scale dtype, group form, tile count
// and code layout (36; e4m3 has no zero points).
#include "linear/gemv_lean.cuh"

// One kernel: _<scale dtype><group form><tiles><layout>, as gemv_int4_lean's without zeros.
#define NINFER_GEMV_FP8_LEAN(SD_NAME, SD, G128, GNAME, P, PNAME, CTAS, CT, LNAME)                                \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::gemv_lean::kThreads,                          \
                                               ninfer::cuda_plugin::gemv_lean::CTAS)                              \
      ninfer_linear_gemv_fp8_lean_##SD_NAME##GNAME##PNAME##LNAME(                                                   \
          ninfer::cuda_plugin::quant::Args a, long long b, long long e, ninfer::cuda_plugin::gemv_lean::Split s) { \
    ninfer::cuda_plugin::gemv_lean::gemv<ninfer::cuda_plugin::gemv_lean::Fp8, SD, false, G128, P, CT>(a, b, e, s);  \
  }
#define NINFER_GEMV_FP8_LEAN_FORMS(SD_NAME, SD, P, PNAME, CTAS, CT, LNAME)    \
  NINFER_GEMV_FP8_LEAN(SD_NAME, SD, true, _g128, P, PNAME, CTAS, CT, LNAME)   \
  NINFER_GEMV_FP8_LEAN(SD_NAME, SD, false, _groups, P, PNAME, CTAS, CT, LNAME)
NINFER_GEMV_LEAN_KERNELS(NINFER_GEMV_FP8_LEAN_FORMS)

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {

template <>
const QuantKernel* gemv_lean::LeanDef<gemv_lean::Fp8>::kernels() {
#define NINFER_GEMV_FP8_LEAN_ENTRY(NAME) {#NAME, reinterpret_cast<const void*>(NAME)}
#define NINFER_GEMV_FP8_LEAN_ENTRIES(SD, PNAME, LNAME)                               \
  NINFER_GEMV_FP8_LEAN_ENTRY(ninfer_linear_gemv_fp8_lean_##SD##_g128##PNAME##LNAME), \
      NINFER_GEMV_FP8_LEAN_ENTRY(ninfer_linear_gemv_fp8_lean_##SD##_groups##PNAME##LNAME)
  static const QuantKernel k[kernel_count] = {NINFER_GEMV_LEAN_ENTRIES(NINFER_GEMV_FP8_LEAN_ENTRIES)};
#undef NINFER_GEMV_FP8_LEAN_ENTRIES
#undef NINFER_GEMV_FP8_LEAN_ENTRY
  return k;
}

int32_t register_linear_gemv_fp8_lean(const ninfer_registrar* r, char* err, size_t err_len) {
  static ninfer_variant storage;
  return QuantLinearVariant<gemv_lean::LeanDef<gemv_lean::Fp8>>::add(r, storage, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
