// The run-time compiled `linear` family for decode-sized token counts
// (kernels/linear/gemv_warp_template.cuh): its parameters, the variant names that spell them, the sweep
// ninfer-tune times, and the NVRTC program that compiles one parameter set. Plain C++, no CUDA:
// the plugins build their variants from it and the CPU tests check it.
//
// Names: jit_gemv_t<threads>_r<rows>_v<vec>_m<tokens>, e.g. jit_gemv_t128_r4_v8_m1:
//   t  threads per CTA: 64, 128, 256, 512 (whole warps)
//   r  rows of W (outputs) per warp: 1, 2, 4 or 8
//   v  weight elements per load per lane: 2, 4 or 8 (bf16: 4, 8 or 16 bytes)
//   m  tokens per CTA (the M of the GEMM): 1 to 8
// Every value is decimal without leading zeros, so each parameter set has exactly one name.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ninfer::cuda_plugin::jit {

struct GemvParams {
  int threads = 128;
  int rows = 4;
  int vec = 8;
  int tokens = 1;
  bool operator==(const GemvParams&) const = default;
};

// Names starting with this are the family's; the plugin registers none of them, it makes them on
// demand (ninfer_plugin::make_variant).
inline constexpr std::string_view kGemvPrefix = "jit_gemv_";
inline constexpr int kGemvMaxTokens = 8; // the family is for decode: 1..8 tokens per CTA

bool is_gemv_name(std::string_view name);
std::string gemv_name(const GemvParams& p);
// The parameters a name spells; nullopt, and why in `why`, when it is not a valid name.
std::optional<GemvParams> parse_gemv_name(std::string_view name, std::string* why);

// ninfer-tune's sweep for a bucket of `tokens` tokens (1..kGemvMaxTokens): 12 parameter sets
// (threads 128/256 x rows 1/2/4 x vec 4/8), each with m = `tokens` rounded up to a power of two,
// so one CTA covers the bucket and W is streamed once. Empty for larger buckets.
std::vector<GemvParams> gemv_sweep(int64_t tokens);

// The kernel template's text (embedded at build time).
const std::string& gemv_template_source();
// The NVRTC program of one parameter set: the template and two extern "C" entry points,
// gemv_kernel_name(BF16 / F32 weights), with the (x, x_stride, w, y, y_stride, K, N, begin, end,
// accumulate) arguments of the template's gemv().
std::string gemv_program_source(const GemvParams& p);
const char* gemv_kernel_name(bool bf16_weights);

} // namespace ninfer::cuda_plugin::jit
