// The compact KV cache formats of kv_append.h on the CPU plugin: kv_append's codes and scales
// against a float64 oracle of the same quantization, the dequantized rows against the format's
// error bound, and attention over the cache against a float64 attention over the rows the test
// decodes from the cache bytes itself (the layout as the contract words it).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "ninfer/abi/ops/attention.h"
#include "ninfer/abi/ops/kv_append.h"
#include "kv_blocks.hpp"
#include "kv_rows.hpp"
#include "ninfer/support/error.hpp"
#include "op_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

// ---- The oracle: the formats from their definitions, in double. ----

// x rounded to IEEE binary16 (nearest even; infinite past 65504's rounding range).
double round_f16(double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  int e;
  std::frexp(x, &e);
  const double quantum = std::ldexp(1.0, std::max(e - 1, -14) - 10);
  const double r = std::nearbyint(x / quantum) * quantum;
  return std::fabs(r) > 65504 ? std::copysign(INFINITY, r) : r;
}
double decode_f16(uint16_t b) {
  const int sign = b >> 15, exp = (b >> 10) & 31, frac = b & 1023;
  const double mag = exp == 31 ? (frac ? NAN : INFINITY) : exp == 0 ? std::ldexp(frac, -24) : std::ldexp(1024 + frac, exp - 25);
  return sign ? -mag : mag;
}
// x rounded to e4m3fn (nearest even, 3 mantissa bits, smallest normal 2^-6), saturated to 448.
double round_e4m3(double x) {
  if (x == 0) return x;
  int e;
  std::frexp(x, &e);
  const double quantum = std::ldexp(1.0, std::max(e - 1, -6) - 3);
  const double r = std::nearbyint(x / quantum) * quantum;
  return std::fabs(r) > 448 ? std::copysign(448.0, r) : r;
}
double decode_e4m3(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  const double mag = (e == 15 && m == 7) ? NAN : e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  return (b & 0x80) ? -mag : mag;
}
// H x with the explicit normalized Hadamard matrix H[i][j] = (-1)^popcount(i & j) / sqrt(n).
std::vector<double> hadamard(const std::vector<double>& x) {
  const size_t n = x.size();
  std::vector<double> y(n, 0.0);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) y[i] += (std::popcount(i & j) & 1 ? -x[j] : x[j]);
  for (auto& e : y) e /= std::sqrt(double(n));
  return y;
}

struct Format {
  const char* name;
  int32_t dtype;
  int qmin, qmax;     // integer formats: codes in [qmin, qmax]; 0, 0 for fp8
  bool rotates_keys;
  // Half-width, in units of the code, of the window around a rounding tie inside which the
  // plugin's float32 arithmetic may legitimately pick the other neighbour (kv_append.h): a
  // float32 quotient (2^-24 relative), and for rotated keys a float32 Hadamard transform whose
  // rounding grows with log2(head_dim) stages of sums.
  double tie_window;
};
constexpr Format kInt8{"kv_int8", NINFER_DTYPE_KV_INT8, -127, 127, false, 1e-4};
constexpr Format kFp8{"kv_fp8", NINFER_DTYPE_KV_FP8, 0, 0, false, 1e-5};
constexpr Format kInt4r{"kv_int4r", NINFER_DTYPE_KV_INT4R, -8, 7, true, 1e-4};

// KV_FP8 and KV_INT4R pick the candidate scale of least squared error (kv_append.h). The
// oracle's error of the plugin's pick may exceed its least by float32 rounding: of the decoded
// values (2^-24 relative, on errors of 2^-5 relative and up: ~1e-6 of the sum), and for rotated
// keys of the transform (the plugin's y differs from the oracle's by ~1e-6 relative).
constexpr double kLeastErrorSlack = 1e-4;
bool least_error(const Format& f) { return f.dtype != NINFER_DTYPE_KV_INT8; }

// The contract's candidate scales of a group (KV_FP8: a row) of absmax a: float32 quotients
// (a double quotient rounded to float is the correctly rounded float32 one), then fp16 for
// KV_INT4R.
std::vector<double> candidate_scales(const Format& f, double a) {
  std::vector<double> c;
  if (f.dtype == NINFER_DTYPE_KV_FP8)
    for (int i = 0; i < NINFER_KV_FP8_SCALE_CANDIDATES; ++i) c.push_back(float(float(a) / (448.0 - 14 * i)));
  else
    for (int i = 0; i < NINFER_KV_INT4_SCALE_CANDIDATES; ++i) c.push_back(round_f16(float(float(a) / (7 + i / 4.0))));
  return c;
}

// The oracle's code of y / s.
double oracle_code(const Format& f, double u) {
  return f.qmax ? std::clamp(std::nearbyint(u), double(f.qmin), double(f.qmax)) : round_e4m3(u);
}

// The squared error of y[g0, g0 + n) under scale s with the oracle's codes.
double squared_error(const Format& f, const std::vector<double>& y, int32_t g0, int32_t n, double s) {
  double e2 = 0;
  for (int32_t d = g0; d < g0 + n; ++d) {
    const double e = (s > 0 ? oracle_code(f, y[d] / s) * s : 0) - y[d];
    e2 += e * e;
  }
  return e2;
}

// At most this fraction of the elements may sit in a tie window (else the window hides bugs).
constexpr double kMaxTieFraction = 1e-3;

// A compact cache on the host, paged through a shuffled block table of 8-token blocks with two
// blocks no slot owns; codes zero, scales NaN-poisoned (a row kv_append did not write reads as
// NaN). row(slot, pos, head) is the head row index of the contract (kv_append.h).
struct Cache {
  KvBlockLayout layout;
  std::vector<uint8_t> k, v, ks, vs;
  ninfer_kv_cache desc{};
  Cache(int32_t dtype, int32_t slots, int32_t capacity, int32_t kv_heads, int32_t hd, std::mt19937_64& rng)
      : layout(KvBlockLayout::shuffled(slots, capacity, 8, 2, rng)) {
    const int64_t rows = layout.pool_rows() * kv_heads;
    k.assign(rows * ninfer_kv_row_bytes(dtype, hd), 0);
    v = k;
    ks.assign(rows * ninfer_kv_row_scale_bytes(dtype, hd), 0xff);
    vs = ks;
    desc = layout.cache(k.data(), v.data(), kv_heads, hd, dtype);
    desc.k_scale = ks.data();
    desc.v_scale = vs.data();
  }
  int64_t row(int32_t slot, int32_t pos, int32_t head) const { return layout.row(slot, pos) * desc.kv_heads + head; }
};

// Row `row` of one tensor as the test reads the contract: codes (in code units) and scales.
struct DecodedRow {
  std::vector<double> code; // integer code, or e4m3 value
  std::vector<double> scale; // per element
};
DecodedRow decode_row(const Format& f, const uint8_t* codes, const uint8_t* scales, int64_t row, int32_t hd) {
  DecodedRow r{std::vector<double>(hd), std::vector<double>(hd)};
  const int32_t groups = hd / NINFER_KV_GROUP;
  for (int32_t d = 0; d < hd; ++d) {
    if (f.dtype == NINFER_DTYPE_KV_FP8) {
      float s;
      std::memcpy(&s, scales + row * 4, 4);
      r.scale[d] = s;
      r.code[d] = decode_e4m3(codes[row * hd + d]);
      continue;
    }
    uint16_t sb;
    std::memcpy(&sb, scales + (row * groups + d / NINFER_KV_GROUP) * 2, 2);
    r.scale[d] = decode_f16(sb);
    if (f.dtype == NINFER_DTYPE_KV_INT8) {
      r.code[d] = static_cast<int8_t>(codes[row * hd + d]);
    } else {
      const uint8_t b = codes[(row * hd + d) / 2];
      r.code[d] = ((d & 1) ? b >> 4 : b & 15) - 8;
    }
  }
  return r;
}
// The values a decoded row represents: code * scale, and for rotated keys H k'.
std::vector<double> row_values(const Format& f, bool key, const DecodedRow& r) {
  std::vector<double> x(r.code.size());
  for (size_t d = 0; d < x.size(); ++d)
    x[d] = f.dtype == NINFER_DTYPE_KV_FP8 ? double(float(r.code[d]) * float(r.scale[d])) : r.code[d] * r.scale[d];
  return key && f.rotates_keys ? hadamard(x) : x;
}

// Checks one tensor's row against the oracle's quantization of x (float32 input row).
// Returns the number of elements that sat in a tie window.
int64_t check_row(const Format& f, bool key, const float* x, const DecodedRow& got, int32_t hd, const std::string& what) {
  std::vector<double> y(x, x + hd);
  if (key && f.rotates_keys) y = hadamard(y);
  int64_t ties = 0;
  const int32_t group = f.dtype == NINFER_DTYPE_KV_FP8 ? hd : NINFER_KV_GROUP;
  for (int32_t g0 = 0; g0 < hd; g0 += group) {
    double a = 0;
    for (int32_t d = g0; d < g0 + group; ++d) a = std::max(a, std::fabs(y[d]));
    const double got_s = got.scale[g0];
    double s;
    if (least_error(f)) {
      // The pick is one of the candidates (KV_INT4R: up to an fp16 tie of the plugin's own
      // absmax or quotient), and its error is the least up to rounding.
      const std::vector<double> c = candidate_scales(f, a);
      double least = INFINITY, nearest = c[0];
      for (double ci : c) {
        least = std::min(least, squared_error(f, y, g0, group, ci));
        if (std::fabs(ci - got_s) < std::fabs(nearest - got_s)) nearest = ci;
      }
      if (got_s != nearest) {
        EXPECT_NEAR(got_s, nearest, f.qmax ? std::ldexp(1.0, std::ilogb(nearest) - 10) * 1.0001 : 0.0)
            << what << ": scale of group " << g0 / group << " is no candidate of absmax " << a;
        ++ties;
      }
      EXPECT_LE(squared_error(f, y, g0, group, got_s), least * (1 + kLeastErrorSlack) + 1e-300)
          << what << ": group " << g0 / group << "'s scale " << got_s << " is not the least-error candidate";
      s = got_s;
    } else {
      s = round_f16(a / f.qmax);
      if (got_s != s) { // the plugin's absmax or its float32 quotient may round across an fp16 tie
        EXPECT_NEAR(got_s, s, std::ldexp(1.0, std::ilogb(s) - 10) * 1.0001) << what << ": scale of group " << g0 / group;
        ++ties;
        s = got_s;
      }
    }
    for (int32_t d = g0; d < g0 + group; ++d) {
      const double u = s > 0 ? y[d] / s : 0;
      const double want = oracle_code(f, u);
      if (got.code[d] == want) continue;
      const double mid = (got.code[d] + want) / 2, gap = std::fabs(got.code[d] - want);
      const double unit = f.qmax ? 1.0 : std::ldexp(1.0, std::max(std::ilogb(std::fabs(mid)), -6) - 3);
      EXPECT_TRUE(gap <= unit * 1.0001 && std::fabs(u - mid) <= f.tie_window * std::max(1.0, std::fabs(u)))
          << what << " element " << d << ": code " << got.code[d] << ", the oracle's " << want << " (x/s = " << u
          << ")";
      ++ties;
    }
  }
  return ties;
}

// The format's error bound on one row: |x^ - x| within half a step of the element's scale
// (or the clamp's excess: past the top code, or under a subnormal fp16 scale; KV_FP8: half an
// e4m3 step, 2^-4 of |x| above the subnormals, 2^-10 s below), for rotated keys the row's L2
// error within the rotated elements' bounds (H is orthogonal).
void check_error_bound(const Format& f, bool key, const float* x, const DecodedRow& got, int32_t hd,
                       const std::string& what) {
  const std::vector<double> xh = row_values(f, key, got);
  constexpr double kSlack = 1 + 1e-5; // float32 rounding of the quotient and of the fp8 product
  if (key && f.rotates_keys) {
    // Each rotated element within half a step, or past the top code 7 what clamping leaves.
    const std::vector<double> y = hadamard(std::vector<double>(x, x + hd));
    double err2 = 0, bound2 = 0;
    for (int32_t d = 0; d < hd; ++d) {
      err2 += (xh[d] - x[d]) * (xh[d] - x[d]);
      const double b = std::max(got.scale[d] / 2, std::fabs(y[d]) - f.qmax * got.scale[d]);
      bound2 += b * b;
    }
    EXPECT_LE(std::sqrt(err2), std::sqrt(bound2) * kSlack + 1e-30) << what << ": L2 error of a rotated key row";
    return;
  }
  for (int32_t d = 0; d < hd; ++d) {
    const double s = got.scale[d];
    // Integer formats: half a step, or what clamping at qmax leaves (KV_INT4R's least-error
    // scale may put the largest element past 7.5 steps; a subnormal fp16 scale loses precision).
    const double bound = f.qmax ? std::max(s / 2, std::fabs(x[d]) - f.qmax * s)
                                : std::max(std::ldexp(double(std::fabs(x[d])), -4), std::ldexp(s, -10));
    EXPECT_LE(std::fabs(xh[d] - x[d]), bound * kSlack) << what << " element " << d << " (x " << x[d] << ")";
  }
}

class KvFormat : public testing::TestWithParam<Format> {};

// kv_append of rows with a wide spread of magnitudes at head_dim 64, 128 and 256: every code
// and scale as the oracle quantizes (bar ties), every row within the format's error bound.
TEST_P(KvFormat, AppendQuantizesAsTheFloat64Oracle) {
  const Format& f = GetParam();
  Backend be = cpu_backend();
  auto rng = fresh_rng((std::string("kv format ") + f.name).c_str());
  for (int32_t hd : {64, 128, 256}) {
    const int32_t slots = 2, capacity = 24, kv_heads = 3;
    Cache cache(f.dtype, slots, capacity, kv_heads, hd, rng);
    TokenBatch tb;
    tb.add(1, 0, 20);
    tb.add(0, 3, 4);
    const int64_t T = tb.tokens(), row = int64_t{kv_heads} * hd;
    const auto k = rows_with_spread(rng, T * kv_heads, hd), v = rows_with_spread(rng, T * kv_heads, hd);
    ninfer_kv_append_args ap{k.data(), row, v.data(), row, cache.desc, tb.batch(), T};
    be.run(NINFER_OP_KV_APPEND, {T, {hd, kv_heads, 0, 0}, f.dtype}, &ap);
    int64_t ties = 0;
    for (int64_t t = 0; t < T; ++t)
      for (int32_t h = 0; h < kv_heads; ++h) {
        const int64_t r = cache.row(tb.seq_slot[tb.token_seq[t]], tb.token_pos[t], h);
        const std::string what = std::string(f.name) + " hd " + std::to_string(hd) + " token " + std::to_string(t);
        for (bool key : {true, false}) {
          const float* x = (key ? k : v).data() + t * row + int64_t{h} * hd;
          const DecodedRow got = decode_row(f, (key ? cache.k : cache.v).data(), (key ? cache.ks : cache.vs).data(), r, hd);
          ties += check_row(f, key, x, got, hd, what + (key ? " K" : " V"));
          check_error_bound(f, key, x, got, hd, what + (key ? " K" : " V"));
        }
      }
    EXPECT_LE(ties, kMaxTieFraction * 2 * T * row + 2) << f.name << " hd " << hd << ": elements in tie windows";
  }
}

// A zero row quantizes to scale 0 and codes 0 (it reads as zeros); a row holding NaN or an
// infinity, or whose scale would pass 65504, gets a NaN scale (it reads as NaN, never finite).
TEST_P(KvFormat, ZeroAndNonFiniteRows) {
  const Format& f = GetParam();
  Backend be = cpu_backend();
  const int32_t hd = 64;
  auto rng = fresh_rng("kv format non-finite rows");
  for (float bad : {0.f, std::numeric_limits<float>::quiet_NaN(), INFINITY, 3e9f}) {
    Cache cache(f.dtype, 1, 1, 1, hd, rng);
    std::vector<float> x(hd, 0.f);
    x[7] = bad;
    TokenBatch tb;
    tb.add(0, 0, 1);
    ninfer_kv_append_args ap{x.data(), hd, x.data(), hd, cache.desc, tb.batch(), 1};
    be.run(NINFER_OP_KV_APPEND, {1, {hd, 1, 0, 0}, f.dtype}, &ap);
    const DecodedRow got = decode_row(f, cache.v.data(), cache.vs.data(), cache.row(0, 0, 0), hd);
    const std::vector<double> xh = row_values(f, false, got);
    if (bad == 0.f) {
      EXPECT_EQ(got.scale[0], 0.0) << f.name;
      for (double e : xh) EXPECT_EQ(e, 0.0) << f.name;
    } else if (bad == 3e9f && f.dtype == NINFER_DTYPE_KV_FP8) {
      EXPECT_NEAR(xh[7], bad, bad * 0x1p-4) << f.name << ": a float32 scale holds 3e9 / 448";
    } else {
      EXPECT_TRUE(std::isnan(got.scale[0])) << f.name << " with " << bad;
      EXPECT_TRUE(std::isnan(xh[0])) << f.name << " with " << bad;
    }
  }
}

// A head_dim the format cannot take is refused by the variant (the planner finds none).
TEST_P(KvFormat, RefusesAHeadDimTheFormatCannotTake) {
  const Format& f = GetParam();
  if (f.dtype == NINFER_DTYPE_KV_FP8) GTEST_SKIP() << "kv_fp8 takes any head_dim";
  Backend be = cpu_backend();
  auto rng = fresh_rng("kv format head_dim refusal");
  for (int32_t hd : {32, 96}) {
    Cache cache(f.dtype, 1, 1, 1, 128, rng);
    std::vector<float> x(hd, 1.f);
    cache.desc.head_dim = hd;
    TokenBatch tb;
    tb.add(0, 0, 1);
    ninfer_kv_append_args ap{x.data(), hd, x.data(), hd, cache.desc, tb.batch(), 1};
    EXPECT_THROW(be.run(NINFER_OP_KV_APPEND, {1, {hd, 1, 0, 0}, f.dtype}, &ap), Error) << f.name << " hd " << hd;
  }
}

// Attention over a compact cache across a prefill chunk, a mixed call and decode steps: the
// output of the rows the cache holds (decoded by the test from the bytes), in float64. A
// position a token may not see holds NaN scales (the cache starts poisoned).
TEST_P(KvFormat, AttentionReadsTheDequantizedRows) {
  const Format& f = GetParam();
  Backend be = cpu_backend();
  auto rng = fresh_rng((std::string("kv format attention ") + f.name).c_str());
  const int32_t slots = 3, capacity = 40, kv_heads = 2, hd = 128, heads = 6;
  Cache cache(f.dtype, slots, capacity, kv_heads, hd, rng);
  const int64_t kv_row = int64_t{kv_heads} * hd, q_stride = int64_t{heads} * hd + 5, out_stride = q_stride + 3;
  const float scale = 1.f / std::sqrt(float(hd));
  auto call = [&](const TokenBatch& tb, const char* what) {
    const int64_t T = tb.tokens();
    auto q = randn(rng, T * q_stride), k = randn(rng, T * kv_row), v = randn(rng, T * kv_row);
    const ninfer_token_batch batch = tb.batch();
    ninfer_kv_append_args ap{k.data(), kv_row, v.data(), kv_row, cache.desc, batch, T};
    be.run(NINFER_OP_KV_APPEND, {T, {hd, kv_heads, 0, 0}, f.dtype}, &ap);
    int32_t longest = 0;
    for (int64_t t = 0; t < T; ++t) longest = std::max(longest, tb.token_pos[t] + 1);
    auto out = poisoned(T * out_stride);
    ninfer_attention_args at{q.data(), q_stride, hd, cache.desc, batch, out.data(), out_stride, T, heads, scale};
    be.run(NINFER_OP_ATTENTION, {T, {hd, heads, kv_heads, longest}, f.dtype}, &at);
    std::vector<float> got;
    std::vector<double> want;
    for (int64_t t = 0; t < T; ++t) {
      const int32_t slot = tb.seq_slot[tb.token_seq[t]], pos = tb.token_pos[t];
      for (int32_t h = 0; h < heads; ++h) {
        const int32_t g = h / (heads / kv_heads);
        std::vector<std::vector<double>> kr, vr;
        std::vector<double> s;
        double mx = -1e300;
        for (int32_t j = 0; j <= pos; ++j) {
          const int64_t r = cache.row(slot, j, g);
          kr.push_back(row_values(f, true, decode_row(f, cache.k.data(), cache.ks.data(), r, hd)));
          vr.push_back(row_values(f, false, decode_row(f, cache.v.data(), cache.vs.data(), r, hd)));
          double dot = 0;
          for (int32_t d = 0; d < hd; ++d) dot += double(q[t * q_stride + h * hd + d]) * kr.back()[d];
          s.push_back(dot * scale);
          mx = std::max(mx, s.back());
        }
        double z = 0;
        for (auto& e : s) z += (e = std::exp(e - mx));
        for (int32_t d = 0; d < hd; ++d) {
          double o = 0;
          for (int32_t j = 0; j <= pos; ++j) o += s[j] / z * vr[j][d];
          want.push_back(o);
          got.push_back(out[t * out_stride + h * hd + d]);
        }
      }
    }
    const Mismatch m = compare(got, want, kFloat32Exact);
    EXPECT_TRUE(m.ok) << f.name << " " << what << ": " << m.describe();
  };
  TokenBatch prefill;
  prefill.add(2, 0, 12);
  call(prefill, "prefill");
  TokenBatch mixed;
  mixed.add(2, 12, 1);
  mixed.add(0, 0, 5);
  call(mixed, "mixed");
  for (int step = 0; step < 3; ++step) {
    TokenBatch decode;
    decode.add(0, 5 + step, 1);
    decode.add(2, 13 + step, 1);
    call(decode, "decode");
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, KvFormat, testing::Values(kInt8, kFp8, kInt4r),
                         [](const testing::TestParamInfo<Format>& p) { return std::string(p.param.name); });

// The oracle's own edges, from the formats' definitions.
TEST(KvFormatOracle, Edges) {
  EXPECT_EQ(round_e4m3(448.0 + 15), 448.0);        // saturates
  EXPECT_EQ(round_e4m3(1.0 + 1.0 / 16), 1.0);      // a tie rounds to the even mantissa
  EXPECT_EQ(round_e4m3(1.0 + 3.0 / 16), 1.25);
  EXPECT_EQ(round_e4m3(0x1p-10), 0.0);             // half the smallest subnormal 2^-9, a tie to 0
  EXPECT_EQ(decode_e4m3(0x7e), 448.0);
  EXPECT_EQ(decode_e4m3(0x01), 0x1p-9);
  EXPECT_EQ(round_f16(65519.0), 65504.0);
  const std::vector<double> e1 = hadamard({1, 0, 0, 0});
  for (double e : e1) EXPECT_DOUBLE_EQ(e, 0.5);
  const std::vector<double> back = hadamard(hadamard({0.3, -2, 7, 1.5}));
  EXPECT_NEAR(back[2], 7.0, 1e-12); // H H = I
}

} // namespace
