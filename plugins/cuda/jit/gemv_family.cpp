#include "gemv_family.hpp"

#include <algorithm>
#include <charconv>
#include <initializer_list>

namespace ninfer::cuda_plugin::jit {
namespace embedded {
extern const char* const kGemvTemplateSource; // gemv_template_source.gen.cpp (generated)
}

namespace {

bool one_of(int v, std::initializer_list<int> allowed) {
  return std::find(allowed.begin(), allowed.end(), v) != allowed.end();
}

// "<letter><decimal>" with no sign and no leading zero.
bool field(std::string_view part, char letter, int* out) {
  if (part.size() < 2 || part[0] != letter || part[1] == '0') return false;
  const char* end = part.data() + part.size();
  auto [ptr, ec] = std::from_chars(part.data() + 1, end, *out);
  return ec == std::errc() && ptr == end;
}

std::string str(int v) { return std::to_string(v); }

} // namespace

bool is_gemv_name(std::string_view name) { return name.substr(0, kGemvPrefix.size()) == kGemvPrefix; }

std::string gemv_name(const GemvParams& p) {
  return std::string(kGemvPrefix) + "t" + str(p.threads) + "_r" + str(p.rows) + "_v" + str(p.vec) + "_m" +
         str(p.tokens);
}

std::optional<GemvParams> parse_gemv_name(std::string_view name, std::string* why) {
  auto fail = [&](const std::string& reason) -> std::optional<GemvParams> {
    if (why)
      *why = "'" + std::string(name) + "' is not a run-time compiled linear variant: " + reason + " (expected " +
             std::string(kGemvPrefix) + "t<threads>_r<rows>_v<vec>_m<tokens>, e.g. " + gemv_name({}) + ")";
    return std::nullopt;
  };
  if (!is_gemv_name(name)) return fail("it does not start with '" + std::string(kGemvPrefix) + "'");
  std::string_view rest = name.substr(kGemvPrefix.size());
  std::vector<std::string_view> parts;
  for (size_t at = 0;;) {
    const size_t us = rest.find('_', at);
    parts.push_back(rest.substr(at, us == std::string_view::npos ? std::string_view::npos : us - at));
    if (us == std::string_view::npos) break;
    at = us + 1;
  }
  GemvParams p;
  if (parts.size() != 4 || !field(parts[0], 't', &p.threads) || !field(parts[1], 'r', &p.rows) ||
      !field(parts[2], 'v', &p.vec) || !field(parts[3], 'm', &p.tokens))
    return fail("its fields do not read as t<N>_r<N>_v<N>_m<N>");
  if (!one_of(p.threads, {64, 128, 256, 512})) return fail("threads " + str(p.threads) + " is not 64, 128, 256 or 512");
  if (!one_of(p.rows, {1, 2, 4, 8})) return fail("rows per warp " + str(p.rows) + " is not 1, 2, 4 or 8");
  if (!one_of(p.vec, {2, 4, 8})) return fail("vector width " + str(p.vec) + " is not 2, 4 or 8");
  if (p.tokens < 1 || p.tokens > kGemvMaxTokens)
    return fail("tokens per CTA " + str(p.tokens) + " is outside 1.." + str(kGemvMaxTokens));
  return p;
}

std::vector<GemvParams> gemv_sweep(int64_t tokens) {
  std::vector<GemvParams> out;
  if (tokens < 1 || tokens > kGemvMaxTokens) return out;
  int m = 1;
  while (m < tokens) m *= 2;
  for (int threads : {128, 256})
    for (int rows : {1, 2, 4})
      for (int vec : {4, 8}) out.push_back({threads, rows, vec, m});
  return out;
}

const std::string& gemv_template_source() {
  static const std::string s = embedded::kGemvTemplateSource;
  return s;
}

const char* gemv_kernel_name(bool bf16_weights) { return bf16_weights ? "ninfer_jit_gemv_bf16" : "ninfer_jit_gemv_f32"; }

std::string gemv_program_source(const GemvParams& p) {
  const std::string params = str(p.threads) + ", " + str(p.rows) + ", " + str(p.vec) + ", " + str(p.tokens);
  std::string s = gemv_template_source();
  for (bool bf16 : {true, false})
    s += std::string("\nextern \"C\" __global__ void __launch_bounds__(") + str(p.threads) + ")\n    " +
         gemv_kernel_name(bf16) +
         "(const float* x, long long x_stride, const void* w, float* y, long long y_stride, int K, int N,\n"
         "        long long begin, long long end, int accumulate) {\n"
         "  ninfer_jit::gemv<ninfer_jit::" +
         (bf16 ? "Bf16" : "F32") + ", " + params + ">(x, x_stride, w, y, y_stride, K, N, begin, end, accumulate);\n}\n";
  return s;
}

} // namespace ninfer::cuda_plugin::jit
