#include "ninfer/jit/linear_gemv.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "ninfer/abi/plugin_abi.h"

namespace ninfer::jit {
namespace embedded {
extern const char* const kLinearGemvSource; // embedded_sources.cpp (generated)
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

} // namespace

std::string gemv_name(const GemvParams& p) {
  return fmt::format("{}t{}_r{}_v{}_m{}", kGemvPrefix, p.threads, p.rows, p.vec, p.tokens);
}

std::optional<GemvParams> parse_gemv_name(std::string_view name, std::string* why) {
  auto fail = [&](const std::string& reason) -> std::optional<GemvParams> {
    if (why)
      *why = fmt::format("'{}' is not a run-time compiled linear variant: {} (expected {}t<threads>_r<rows>_v<vec>_m<tokens>, "
                         "e.g. {})",
                         name, reason, kGemvPrefix, gemv_name({}));
    return std::nullopt;
  };
  if (name.substr(0, kGemvPrefix.size()) != kGemvPrefix) return fail(fmt::format("it does not start with '{}'", kGemvPrefix));
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
  if (!one_of(p.threads, {64, 128, 256, 512})) return fail(fmt::format("threads {} is not 64, 128, 256 or 512", p.threads));
  if (!one_of(p.rows, {1, 2, 4, 8})) return fail(fmt::format("rows per warp {} is not 1, 2, 4 or 8", p.rows));
  if (!one_of(p.vec, {2, 4, 8})) return fail(fmt::format("vector width {} is not 2, 4 or 8", p.vec));
  if (p.tokens < 1 || p.tokens > kGemvMaxTokens)
    return fail(fmt::format("tokens per CTA {} is outside 1..{}", p.tokens, kGemvMaxTokens));
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

const std::string& gemv_source() {
  static const std::string s = embedded::kLinearGemvSource;
  return s;
}

std::string gemv_expression(const GemvParams& p, int32_t w_dtype) {
  return fmt::format("ninfer_jit::gemv_{}<{}, {}, {}, {}>", w_dtype == NINFER_DTYPE_BF16 ? "bf16" : "f32", p.threads, p.rows,
                     p.vec, p.tokens);
}

CompileRequest gemv_request(const GemvParams& p, int cc_major, int cc_minor) {
  CompileRequest r;
  r.name = "linear/" + gemv_name(p);
  r.source = gemv_source();
  r.name_expressions = {gemv_expression(p, NINFER_DTYPE_BF16), gemv_expression(p, NINFER_DTYPE_F32)};
  r.cc_major = cc_major;
  r.cc_minor = cc_minor;
  return r;
}

} // namespace ninfer::jit
