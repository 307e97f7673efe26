// The sample op's CPU reference against a float64 oracle of the distribution it must draw
// from (written here from the contract's definitions: full sort, float64 probabilities), exact
// filter sets on planted edge cases, the host Sampler (same draws, same choice), and the exact
// arithmetic of sample_math.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "ninfer/abi/ops/argmax.h"
#include "ninfer/abi/ops/sample.h"
#include "ninfer/abi/ops/sample_math.h"
#include "ninfer/sampling/sampler.hpp"
#include "op_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

ninfer_sample_row params(double t, int32_t k, double p, double min_p, uint64_t seed = 1, uint64_t counter = 0) {
  return {t, p, min_p, seed, counter, k, 0};
}

// float64 oracle: probability of each token after temperature, top-k (ties to the lower id),
// top-p over the top-k distribution (keep while the mass before < top_p), min-p.
std::vector<double> oracle(const std::vector<float>& l, const ninfer_sample_row& P) {
  const int V = static_cast<int>(l.size());
  const double m = *std::max_element(l.begin(), l.end());
  std::vector<double> w(V);
  for (int j = 0; j < V; ++j) w[j] = std::exp((double(l[j]) - m) / P.temperature);
  std::vector<int> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
  const int k = (P.top_k > 0 && P.top_k < V) ? P.top_k : V;
  double total = 0;
  for (int r = 0; r < k; ++r) total += w[order[r]];
  std::vector<double> p(V, 0.0);
  double mass = 0, kept = 0;
  for (int r = 0; r < k; ++r) {
    if (P.top_p < 1 && mass >= P.top_p * total) break;
    const int j = order[r];
    mass += w[j];
    if (P.min_p > 0 && w[j] < P.min_p) continue;
    p[j] = w[j];
    kept += w[j];
  }
  for (double& x : p) x /= kept;
  return p;
}

struct Draws {
  std::vector<int32_t> ids;
  std::vector<float> logprob;
};

// `n` draws (counters 0..n-1 of `P.seed`) from one logits row, in one call (row stride 0).
Draws draw_many(Backend& be, const std::vector<float>& l, ninfer_sample_row P, int64_t n) {
  std::vector<ninfer_sample_row> ps(static_cast<size_t>(n), P);
  for (int64_t i = 0; i < n; ++i) ps[i].counter = static_cast<uint64_t>(i);
  Draws d{std::vector<int32_t>(n, -7), poisoned(n)};
  ninfer_sample_args a{l.data(), 0, ps.data(), d.ids.data(), d.logprob.data(), n, static_cast<int32_t>(l.size())};
  be.run(NINFER_OP_SAMPLE, {n, {static_cast<int64_t>(l.size()), 0, 0, 0}, NINFER_DTYPE_F32}, &a);
  return d;
}

std::set<int32_t> support_of(const Draws& d) { return {d.ids.begin(), d.ids.end()}; }

// Bernstein bound on |frequency - p| over n independent draws, failure probability delta.
double bernstein(double p, double n, double delta) {
  const double L = std::log(2 / delta);
  return std::sqrt(2 * p * (1 - p) * L / n) + 2 * L / (3 * n);
}

} // namespace

// Seeded draws over many counters follow the oracle distribution: every token's frequency is
// within a Bernstein bound (failure probability 1e-9 per token) of its probability; tokens the
// oracle excludes are never drawn; the log-probability is the raw log-softmax.
TEST(SampleOp, DrawsFollowTheFilteredDistribution) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("sample distribution");
  const int64_t n = 100000;
  const std::vector<ninfer_sample_row> cases = {
      params(1.0, 0, 1.0, 0.0),   params(0.7, 5, 1.0, 0.0),  params(1.3, 0, 0.8, 0.0),
      params(1.0, 10, 0.9, 0.05), params(0.5, 0, 1.0, 0.2),  params(2.0, 7, 0.6, 0.0),
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    for (int V : {12, 40}) {
      auto l = randn(rng, static_cast<size_t>(V), 1.5f);
      l[3] = l[7]; // a tie
      l[V - 1] = -kInf;
      ninfer_sample_row P = cases[c];
      P.seed = rng();
      const auto p = oracle(l, P);
      const Draws d = draw_many(be, l, P, n);
      std::vector<double> count(V, 0);
      for (int32_t id : d.ids) {
        ASSERT_GE(id, 0);
        ASSERT_LT(id, V);
        ++count[id];
      }
      double lse = 0;
      const double m = *std::max_element(l.begin(), l.end());
      for (float x : l) lse += std::exp(double(x) - m);
      lse = m + std::log(lse);
      for (int j = 0; j < V; ++j) {
        if (p[j] == 0) EXPECT_EQ(count[j], 0) << "case " << c << " V " << V << ": token " << j << " is filtered out";
        else
          EXPECT_NEAR(count[j] / n, p[j], bernstein(p[j], n, 1e-9)) << "case " << c << " V " << V << " token " << j;
      }
      for (int64_t i = 0; i < 50; ++i) EXPECT_NEAR(d.logprob[i], double(l[d.ids[i]]) - lse, 1e-5);
    }
  }
}

// The exact sets each filter keeps, on planted values where float64 is exact.
TEST(SampleOp, FilterSetsOnEdgeCases) {
  Backend be = cpu_backend();
  const int64_t n = 3000; // every kept token here has probability >= 1/8: all appear
  using S = std::set<int32_t>;
  // top-k with ties at the boundary: ranks 2, 3 (ties go to the lower id).
  const std::vector<float> a = {0, 2, 3, 3, 3, 1};
  EXPECT_EQ(support_of(draw_many(be, a, params(1, 2, 1, 0), n)), (S{2, 3}));
  EXPECT_EQ(support_of(draw_many(be, a, params(5, 1, 1, 0), n)), (S{2}));
  EXPECT_EQ(support_of(draw_many(be, a, params(1, 6, 1, 0), n)), (S{0, 1, 2, 3, 4, 5})); // k = V: off
  // top-p on four equal tokens (others -inf): the mass before a kept token is < top_p.
  std::vector<float> b(9, -kInf);
  for (int j : {1, 3, 5, 7}) b[j] = 1.f;
  EXPECT_EQ(support_of(draw_many(be, b, params(1, 0, 0.5, 0), n)), (S{1, 3}));
  EXPECT_EQ(support_of(draw_many(be, b, params(1, 0, 0.51, 0), n)), (S{1, 3, 5}));
  EXPECT_EQ(support_of(draw_many(be, b, params(1, 0, 0.25, 0), n)), (S{1}));
  EXPECT_EQ(support_of(draw_many(be, b, params(1, 0, 1e-9, 0), n)), (S{1}));
  EXPECT_EQ(support_of(draw_many(be, b, params(1, 3, 0.7, 0), n)), (S{1, 3, 5})); // 0.7 of the top-3 mass
  // top-p measures mass in the top-k distribution: p0 = 0.73 of {0, 1} but 0.64 of all four.
  const std::vector<float> c = {3, 2, 1, 0};
  EXPECT_EQ(support_of(draw_many(be, c, params(1, 2, 0.7, 0), n)), (S{0}));
  EXPECT_EQ(support_of(draw_many(be, c, params(1, 0, 0.7, 0), n)), (S{0, 1}));
  // min-p at exp(-1): relative weights {1, .61, .22, .05} at T = 1, {1, .78, .47, .22} at T = 2.
  const std::vector<float> d = {0, -0.5f, -1.5f, -3};
  EXPECT_EQ(support_of(draw_many(be, d, params(1, 0, 1, std::exp(-1.0)), n)), (S{0, 1}));
  EXPECT_EQ(support_of(draw_many(be, d, params(2, 0, 1, std::exp(-1.0)), n)), (S{0, 1, 2}));
  EXPECT_EQ(support_of(draw_many(be, d, params(2, 0, 1, 5.0), n)), (S{0})); // min_p > 1 acts as 1
}

// temperature 0 (or below 1e-5) is argmax (lowest id of tied maxima), with argmax's
// log-probability; top-k 1 is argmax at any temperature; invalid rows give -1 and a NaN
// log-probability.
TEST(SampleOp, GreedyAndInvalidRows) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("sample greedy");
  const int32_t V = 3000;
  const int64_t rows = 8;
  auto l = randn(rng, rows * V, 3.f);
  for (int64_t r = 0; r < rows; ++r) l[r * V + 10 + r] = l[r * V + 2000 + r] = 30.f; // tied maxima
  std::vector<ninfer_sample_row> ps;
  // Greedy rows: temperature 0, and below NINFER_SAMPLE_MIN_TEMPERATURE, where 1 / T overflows
  // (5e-324) or nearly does: the limit T -> 0, the argmax.
  const double greedy_t[] = {0, 5e-324, 1e-310, 0.99 * NINFER_SAMPLE_MIN_TEMPERATURE};
  for (int64_t r = 0; r < rows; ++r)
    ps.push_back(r % 2 ? params(greedy_t[(r / 2) % 4], 0, 1, 0, rng(), r) : params(0.8, 1, 0.9, 0, rng(), r));
  std::vector<int32_t> ids(rows, -7), am(rows, -7);
  auto lp = poisoned(rows), alp = poisoned(rows);
  ninfer_sample_args a{l.data(), V, ps.data(), ids.data(), lp.data(), rows, V};
  be.run(NINFER_OP_SAMPLE, {rows, {V, 0, 0, 0}, NINFER_DTYPE_F32}, &a);
  ninfer_argmax_args g{l.data(), V, am.data(), alp.data(), rows, V};
  be.run(NINFER_OP_ARGMAX, {rows, {V, 0, 0, 0}, NINFER_DTYPE_F32}, &g);
  EXPECT_EQ(ids, am);
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(ids[r], 10 + r);
    EXPECT_NEAR(lp[r], alp[r], 1e-6);
  }

  std::vector<float> bad(4 * 16, 0.f);
  bad[3] = NAN;
  bad[16 + 5] = kInf;
  for (int j = 0; j < 16; ++j) bad[32 + j] = -kInf;
  for (int j = 0; j < 16; j += 2) bad[48 + j] = -kInf;
  std::vector<ninfer_sample_row> bp(4, params(1, 0, 1, 0));
  std::vector<int32_t> bid(4, -7);
  auto blp = poisoned(4);
  ninfer_sample_args b{bad.data(), 16, bp.data(), bid.data(), blp.data(), 4, 16};
  be.run(NINFER_OP_SAMPLE, {4, {16, 0, 0, 0}, NINFER_DTYPE_F32}, &b);
  EXPECT_EQ(bid[0], -1);
  EXPECT_EQ(bid[1], -1);
  EXPECT_EQ(bid[2], -1);
  EXPECT_TRUE(std::isnan(blp[0]) && std::isnan(blp[1]) && std::isnan(blp[2]));
  EXPECT_EQ(bid[3] % 2, 1) << "a -inf token was drawn";
  EXPECT_NEAR(blp[3], -std::log(8.0), 1e-6);
}

// The op and the host Sampler use the same draws and filters: for the same seed, draw k of the
// op (counter k) is the Sampler's k-th token (no penalties), on Qwen-sized random rows.
TEST(SampleOp, SameTokensAsTheHostSampler) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("sample vs sampler");
  const int32_t V = 151936;
  const std::vector<ninfer_sample_row> cases = {params(1.0, 0, 1.0, 0.0), params(0.6, 20, 0.95, 0.0),
                                                params(0.8, 0, 0.9, 0.0), params(1.2, 50, 1.0, 0.1)};
  for (const auto& c : cases) {
    auto l = randn(rng, V, 2.5f);
    for (int j = 0; j < 50; ++j) l[j * 7] = 9.f; // ties near the top
    SamplingParams sp;
    sp.temperature = c.temperature;
    sp.top_k = c.top_k;
    sp.top_p = c.top_p;
    sp.min_p = c.min_p;
    sp.seed = rng();
    Sampler sampler(sp, {});
    ninfer_sample_row P = c;
    P.seed = *sp.seed;
    const Draws d = draw_many(be, l, P, 40);
    for (int k = 0; k < 40; ++k) EXPECT_EQ(sampler.next(l).token, d.ids[k]) << "draw " << k;
  }
}

// sample_math.h: the exact exp is within 4 ulp of std::exp and exact at 0; the counter-based
// draws are uniform in their top byte (chi-square, 255 degrees of freedom, bound mean + 10 sd).
TEST(SampleOp, ExactArithmetic) {
  auto rng = fresh_rng("sample math");
  std::uniform_real_distribution<double> x(-50, 0);
  for (int i = 0; i < 200000; ++i) {
    const double v = x(rng), e = std::exp(v);
    ASSERT_NEAR(ninfer_sample_exp(v), e, 4 * e * 0x1.0p-52) << v;
  }
  EXPECT_EQ(ninfer_sample_exp(0.0), 1.0);
  EXPECT_EQ(ninfer_sample_exp(-50.5), 0.0);
  EXPECT_EQ(ninfer_sample_exp(-std::numeric_limits<double>::infinity()), 0.0);
  EXPECT_EQ(ninfer_sample_shift(248320), 45);
  EXPECT_EQ(ninfer_sample_shift(1), 63);
  EXPECT_EQ(ninfer_sample_key(-0.f), ninfer_sample_key(0.f));
  EXPECT_LT(ninfer_sample_key(-kInf), ninfer_sample_key(-1e30f));
  EXPECT_LT(ninfer_sample_key(-1.f), ninfer_sample_key(2.f));
  EXPECT_EQ(ninfer_sample_key_value(ninfer_sample_key(-3.5f)), -3.5f);
  std::vector<double> bins(256, 0);
  const uint64_t seed = rng();
  const int n = 1 << 20;
  for (int i = 0; i < n; ++i) ++bins[ninfer_sample_draw(seed, static_cast<uint64_t>(i)) >> 56];
  double chi2 = 0;
  for (double b : bins) chi2 += (b - n / 256.0) * (b - n / 256.0) / (n / 256.0);
  EXPECT_LT(chi2, 255 + 10 * std::sqrt(2 * 255.0));
}
