// linear on int4 weights, 1-8 tokens: gemv_int4_lean (the kernel and its rules:
// linear/gemv_int4_lean.cuh). One kernel per scale dtype, zeros or not, and group form (_g128:
// one step per group; _groups: a group of several steps, or one per row), for 1-4 tokens (one
// MMA column tile) and 5-8 (_t8: two).
#include "linear/gemv_int4_lean.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include <algorithm>

#include "linear/quant_variant.hpp"
#endif

#define NINFER_GEMV_INT4_LEAN(SD_NAME, SD, ZEROS, ZNAME, G128, GNAME, P, PNAME, CTAS)                         \
  extern "C" __global__ void __launch_bounds__(ninfer::cuda_plugin::gemv_int4_lean::kThreads,                   \
                                               ninfer::cuda_plugin::gemv_int4_lean::CTAS)                       \
      ninfer_linear_gemv_int4_lean_##SD_NAME##ZNAME##GNAME##PNAME(ninfer::cuda_plugin::quant::Args a,          \
                                                                    long long b, long long e,                   \
                                                                    ninfer::cuda_plugin::gemv_int4_lean::Split s) { \
    ninfer::cuda_plugin::gemv_int4_lean::gemv<SD, ZEROS, G128, P>(a, b, e, s);                      \
  }
#define NINFER_GEMV_INT4_LEAN_FORMS(SD_NAME, SD, P, PNAME, CTAS)                  \
  NINFER_GEMV_INT4_LEAN(SD_NAME, SD, false, , true, _g128, P, PNAME, CTAS)        \
  NINFER_GEMV_INT4_LEAN(SD_NAME, SD, false, , false, _groups, P, PNAME, CTAS)     \
  NINFER_GEMV_INT4_LEAN(SD_NAME, SD, true, _zeros, true, _g128, P, PNAME, CTAS)   \
  NINFER_GEMV_INT4_LEAN(SD_NAME, SD, true, _zeros, false, _groups, P, PNAME, CTAS)
#define NINFER_GEMV_INT4_LEAN_TILES(P, PNAME, CTAS)              \
  NINFER_GEMV_INT4_LEAN_FORMS(f32, NINFER_DTYPE_F32, P, PNAME, CTAS)   \
  NINFER_GEMV_INT4_LEAN_FORMS(bf16, NINFER_DTYPE_BF16, P, PNAME, CTAS) \
  NINFER_GEMV_INT4_LEAN_FORMS(f16, NINFER_DTYPE_F16, P, PNAME, CTAS)
NINFER_GEMV_INT4_LEAN_TILES(1, , kMinCtasPerSm)
NINFER_GEMV_INT4_LEAN_TILES(2, _t8, kMinCtasPerSm8)

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

namespace lean = gemv_int4_lean;

struct GemvInt4LeanDef {
  static constexpr int kMaxTickets = NINFER_LAUNCH_TICKETS; // one per row block of a cut K
  static constexpr const char* name = "gemv_int4_lean";
  static constexpr int threads = lean::kThreads;
  static constexpr int tokens_per_cta = lean::kMaxTokens;
  static constexpr int launch_tokens = lean::kMaxTokens;       // a call of more: launches of 8
  static constexpr int kMaxCallTokens = 8 * lean::kMaxTokens;  // the codes streamed at most 8 times
  static constexpr uint32_t dtype_mask = 1u << NINFER_DTYPE_INT4;
  // 1-4 tokens, then the _t8 kernels (5-8); each: scale dtype major (f32, bf16, f16), then zeros
  // (without, with), then group form (g128, groups).
  static constexpr int kernel_count = 24;
  static int pick(const ninfer_linear_args& a, const ninfer_launch& l) {
    const int32_t sd = a.wq->scale_dtype;
    const int sd_index = sd == NINFER_DTYPE_F32 ? 0 : sd == NINFER_DTYPE_BF16 ? 1 : 2;
    return (tokens(l) > lean::kTileTokens ? 12 : 0) + sd_index * 4 + (a.wq->zeros ? 2 : 0) +
           (a.wq->group_size == lean::kStepK ? 0 : 1);
  }
  static int tokens(const ninfer_launch& l) { return static_cast<int>(l.token_end - l.token_begin); }
  // The most shared memory a launch of up to `tokens` tokens of the shape takes.
  static size_t smem_for(int64_t K, int64_t N, int64_t tokens) {
    long long most = 0;
    for (int t = 1; t <= tokens && t <= lean::kMaxTokens; ++t) most = std::max(most, lean::smem_bytes(K, N, t));
    return static_cast<size_t>(most);
  }
  // 1-64 tokens (launches of up to 8), whole 128-k steps, groups of whole steps or one per row
  // (group: the planning group, 0 for g_idx), and a merge ticket per row block where K is cut.
  static int32_t takes(int64_t T, int64_t K, int64_t N, int64_t group) {
    if (T < 1 || T > kMaxCallTokens || K < lean::kStepK || K % lean::kStepK != 0 || N < 1 || K > INT32_MAX ||
        N > INT32_MAX)
      return 0;
    if (group < 1 || (group % lean::kStepK != 0 && group < K)) return 0;
    if (N * ((K + group - 1) / group) > INT32_MAX) return 0; // 32-bit scale and zero indices
    for (int t = 1; t <= T && t <= lean::kMaxTokens; ++t)
      if (lean::k_chunks(K, N, t) > 1 && (N + lean::kRows - 1) / lean::kRows > kMaxTickets) return 0;
    return 1;
  }
  static const char* invalid(const ninfer_linear_args& a) {
    if (a.w_dtype != NINFER_DTYPE_INT4) return "takes INT4 weights only";
    if (a.in_features % lean::kStepK != 0) return "in_features must be a multiple of 128";
    if (a.wq->g_idx) return "takes no g_idx (gemv_quant_warp_* do)";
    if (a.wq->group_size % lean::kStepK != 0 && a.wq->group_size < a.in_features)
      return "group_size must be a multiple of 128 or >= in_features";
    if (reinterpret_cast<uintptr_t>(a.w) % 16 != 0) return "w must be 16-byte aligned";
    return nullptr;
  }
  static const char* invalid_launch(const ninfer_linear_args& a, const ninfer_launch& l) {
    const int t = tokens(l);
    if (t < 1 || t > lean::kMaxTokens) return "takes launches of 1 to 8 tokens";
    if (static_cast<size_t>(lean::smem_bytes(a.in_features, a.out_features, t)) > l.dynamic_smem_bytes)
      return "the launch's dynamic shared memory is less than the shape's x needs";
    if (lean::k_chunks(a.in_features, a.out_features, t) == 1) return nullptr;
    if ((a.out_features + lean::kRows - 1) / lean::kRows > kMaxTickets)
      return "more row blocks with a cut K than the backend has merge tickets";
    if (!l.tickets) return "a cut K needs the backend's launch tickets (ninfer_launch.tickets)";
    if (!l.workspace || l.workspace_bytes < partial_bytes(a.in_features, a.out_features, t))
      return "workspace too small for the K chunks' partial sums";
    return nullptr;
  }
  static size_t partial_bytes(int64_t K, int64_t N, int tokens) {
    const int ks = lean::k_chunks(K, N, tokens);
    return ks > 1 ? sizeof(float) * static_cast<size_t>(ks) * static_cast<size_t>(tokens) * static_cast<size_t>(N) : 0;
  }
  static size_t dynamic_smem(const void*, const ninfer_shape* s) { return smem_for(s->dims[0], s->dims[1], s->tokens); }
  static size_t workspace(const void*, const ninfer_shape* s, int64_t tokens_in_launch) {
    size_t most = 0;
    const int64_t T = tokens_in_launch > 0 ? tokens_in_launch : s->tokens;
    for (int t = 1; t <= T && t <= lean::kMaxTokens; ++t) most = std::max(most, partial_bytes(s->dims[0], s->dims[1], t));
    return most;
  }
  static lean::Split extra(const ninfer_linear_args& a, const ninfer_launch& l) {
    return {static_cast<float*>(l.workspace), l.tickets, lean::k_chunks(a.in_features, a.out_features, tokens(l))};
  }
  // Row blocks of lean::kRows rows by K chunks.
  static dim3 grid(const ninfer_linear_args& a, const ninfer_launch& l) {
    return dim3(static_cast<unsigned>((a.out_features + lean::kRows - 1) / lean::kRows),
                static_cast<unsigned>(lean::k_chunks(a.in_features, a.out_features, tokens(l))));
  }
  static const QuantKernel* kernels() {
#define NINFER_GEMV_INT4_LEAN_KERNEL(NAME) {#NAME, reinterpret_cast<const void*>(NAME)}
#define NINFER_GEMV_INT4_LEAN_KERNELS(SD, PNAME)                                              \
  NINFER_GEMV_INT4_LEAN_KERNEL(ninfer_linear_gemv_int4_lean_##SD##_g128##PNAME),              \
      NINFER_GEMV_INT4_LEAN_KERNEL(ninfer_linear_gemv_int4_lean_##SD##_groups##PNAME),        \
      NINFER_GEMV_INT4_LEAN_KERNEL(ninfer_linear_gemv_int4_lean_##SD##_zeros_g128##PNAME),    \
      NINFER_GEMV_INT4_LEAN_KERNEL(ninfer_linear_gemv_int4_lean_##SD##_zeros_groups##PNAME)
    static const QuantKernel k[kernel_count] = {
        NINFER_GEMV_INT4_LEAN_KERNELS(f32, ),    NINFER_GEMV_INT4_LEAN_KERNELS(bf16, ),
        NINFER_GEMV_INT4_LEAN_KERNELS(f16, ),    NINFER_GEMV_INT4_LEAN_KERNELS(f32, _t8),
        NINFER_GEMV_INT4_LEAN_KERNELS(bf16, _t8), NINFER_GEMV_INT4_LEAN_KERNELS(f16, _t8)};
#undef NINFER_GEMV_INT4_LEAN_KERNELS
#undef NINFER_GEMV_INT4_LEAN_KERNEL
    return k;
  }
  // dims[2]: the planning group (linear.h).
  static int32_t supports(const void*, const ninfer_shape* s) {
    return takes(s->tokens, s->dims[0], s->dims[1], s->dims[2]);
  }
};

} // namespace

int32_t register_linear_gemv_int4_lean(const ninfer_registrar* r, char* err, size_t err_len) {
  static ninfer_variant storage;
  return QuantLinearVariant<GemvInt4LeanDef>::add(r, storage, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
