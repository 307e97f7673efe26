// The distribution the sampler draws from: exact support and probabilities of the filters,
// and empirical frequencies of seeded draws, both against the float64 oracle.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "ninfer/support/error.hpp"
#include "ninfer/sampling/sampler.hpp"
#include "sampling_oracle.hpp"
#include "test_support.hpp"

namespace ninfer::test {
namespace {

std::vector<float> random_logits(std::mt19937_64& rng, size_t n, double scale) {
  std::normal_distribution<double> d(0.0, scale);
  std::vector<float> l(n);
  for (float& v : l) v = static_cast<float>(d(rng));
  return l;
}

std::vector<double> widen(const std::vector<float>& f) { return {f.begin(), f.end()}; }

OracleParams random_params(std::mt19937_64& rng, size_t vocab) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  OracleParams o;
  o.temperature = 0.2 + 2.0 * u(rng);
  if (u(rng) < 0.6) o.top_k = 1 + static_cast<int64_t>(u(rng) * 1.2 * static_cast<double>(vocab));
  if (u(rng) < 0.6) o.top_p = 0.05 + 0.95 * u(rng);
  if (u(rng) < 0.5) o.min_p = u(rng) < 0.2 ? 1.0 : 0.3 * u(rng);
  return o;
}

FilterParams to_filter(const OracleParams& o) { return {o.temperature, o.top_k, o.top_p, o.min_p}; }

// The support must be exactly the oracle's and the probabilities agree to float64 rounding.
void expect_same_distribution(const std::vector<Candidate>& got, const OracleResult& want,
                              const std::string& what) {
  ASSERT_EQ(got.size(), want.probs.size()) << what;
  auto w = want.probs.begin();
  for (const Candidate& c : got) {
    ASSERT_EQ(c.id, w->first) << what;
    ASSERT_TRUE(std::isfinite(c.prob)) << what;
    EXPECT_NEAR(c.prob, w->second, 1e-12) << what << " id " << c.id;
    ++w;
  }
}

TEST(SamplingDistribution, FiltersKeepExactlyTheOracleSupport) {
  auto rng = fresh_rng("SamplingDistribution.FiltersKeepExactlyTheOracleSupport");
  // Large vocabularies with flat logits and top_p near 1 make the partial sort grow past its
  // first heads (64, 512, 4096).
  const size_t sizes[] = {1, 2, 7, 100, 1000, 5000, 20000};
  int checked = 0;
  for (size_t vocab : sizes) {
    for (int trial = 0; trial < 40; ++trial) {
      const double scale = trial % 3 == 0 ? 0.05 : (trial % 3 == 1 ? 1.0 : 4.0);
      const std::vector<float> logits = random_logits(rng, vocab, scale);
      const OracleParams o = random_params(rng, vocab);
      const OracleResult want = oracle_distribution(widen(logits), o);
      if (want.margin < 1e-9) continue; // a threshold within rounding of a value: redraw
      const std::string what = "vocab " + std::to_string(vocab) + " T " + std::to_string(o.temperature) +
                               " top_k " + std::to_string(o.top_k) + " top_p " + std::to_string(o.top_p) +
                               " min_p " + std::to_string(o.min_p);
      expect_same_distribution(filtered_distribution(logits, to_filter(o)), want, what);
      ++checked;
    }
  }
  EXPECT_GT(checked, 200);
}

TEST(SamplingDistribution, TopKTiesGoToTheLowerId) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, 2.0f, 2.0f, -1.0f};
  const auto top3 = filtered_distribution(logits, {1.0, 3, 1.0, 0.0});
  ASSERT_EQ(top3.size(), 3u);
  EXPECT_EQ(top3[0].id, 1);
  EXPECT_EQ(top3[1].id, 2); // the first of the three 2.0s
  EXPECT_EQ(top3[2].id, 3);
}

TEST(SamplingDistribution, EachFilterAloneMatchesItsDefinition) {
  // Hand-checkable cases: probabilities 0.5, 0.25, 0.125, 0.0625, 0.0625 at T=1.
  const std::vector<float> logits = {static_cast<float>(std::log(0.5)), static_cast<float>(std::log(0.25)),
                                     static_cast<float>(std::log(0.125)),
                                     static_cast<float>(std::log(0.0625)),
                                     static_cast<float>(std::log(0.0625))};
  auto ids = [](const std::vector<Candidate>& c) {
    std::vector<int32_t> v;
    for (auto& x : c) v.push_back(x.id);
    return v;
  };
  // top_p 0.6: 0.5 alone is below 0.6, so 0.25 joins; the mass before id 2 is 0.75 >= 0.6.
  EXPECT_EQ(ids(filtered_distribution(logits, {1.0, 0, 0.6, 0.0})), (std::vector<int32_t>{0, 1}));
  // Boundary, with exactly representable masses (four equal logits, 0.25 each): at top_p 0.5
  // the mass before id 2 is 0.5, not < 0.5, so two tokens remain.
  const std::vector<float> flat = {0.0f, 0.0f, 0.0f, 0.0f};
  EXPECT_EQ(ids(filtered_distribution(flat, {1.0, 0, 0.5, 0.0})), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(ids(filtered_distribution(flat, {1.0, 0, 0.5000001, 0.0})), (std::vector<int32_t>{0, 1, 2}));
  // min_p 0.2: p >= 0.1 keeps 0.5, 0.25, 0.125.
  EXPECT_EQ(ids(filtered_distribution(logits, {1.0, 0, 1.0, 0.2})), (std::vector<int32_t>{0, 1, 2}));
  // min_p 1: only the maximum.
  EXPECT_EQ(ids(filtered_distribution(logits, {1.0, 0, 1.0, 1.0})), (std::vector<int32_t>{0}));
  // top_k 2 then top_p 0.6 measured in the top-2 distribution (2/3, 1/3): id 0 alone suffices.
  EXPECT_EQ(ids(filtered_distribution(logits, {1.0, 2, 0.6, 0.0})), (std::vector<int32_t>{0}));
  const auto kept = filtered_distribution(logits, {1.0, 2, 1.0, 0.0});
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_NEAR(kept[0].prob, 2.0 / 3.0, 1e-7);
  EXPECT_NEAR(kept[1].prob, 1.0 / 3.0, 1e-7);
}

TEST(SamplingDistribution, MinusInfinityIsAMaskAndNaNIsAnError) {
  const float inf = INFINITY;
  const std::vector<float> masked = {-inf, 0.0f, -inf, 0.0f};
  const auto d = filtered_distribution(masked, {1.0, 0, 1.0, 0.0});
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].id, 1);
  EXPECT_EQ(d[1].id, 3);
  EXPECT_THROW(filtered_distribution(std::vector<float>{-inf, -inf}, {1.0, 0, 1.0, 0.0}), Error);
  EXPECT_THROW(filtered_distribution(std::vector<float>{0.0f, NAN}, {1.0, 0, 1.0, 0.0}), Error);
  EXPECT_THROW(filtered_distribution(std::vector<float>{0.0f, inf}, {1.0, 0, 1.0, 0.0}), Error);
  EXPECT_THROW(filtered_distribution(std::vector<float>{}, {1.0, 0, 1.0, 0.0}), Error);
}

// Bernstein's inequality: P(|f - p| > t) <= 2 exp(-N t^2 / (2 p (1-p) + 2t/3)). Solving for
// t at failure probability delta per token gives the bound below; with delta = 1e-10 and a
// few hundred tokens per run, a correct sampler fails once in ~1e7 runs.
double bernstein_bound(double p, size_t n, double delta = 1e-10) {
  const double L = std::log(2.0 / delta);
  const double a = 2.0 * L / 3.0;
  return (a + std::sqrt(a * a + 8.0 * static_cast<double>(n) * L * p * (1.0 - p))) /
         (2.0 * static_cast<double>(n));
}

struct DrawCase {
  const char* name;
  size_t vocab;
  SamplingParams params;
  bool with_history;
};

TEST(SamplingDistribution, SeededDrawsFollowTheFilteredDistribution) {
  auto rng = fresh_rng("SamplingDistribution.SeededDrawsFollowTheFilteredDistribution");
  auto make = [](double t, int64_t k, double p, double m) {
    SamplingParams s;
    s.temperature = t;
    s.top_k = k;
    s.top_p = p;
    s.min_p = m;
    return s;
  };
  SamplingParams penalised = make(1.0, 0, 1.0, 0.0);
  penalised.repetition_penalty = 1.4;
  penalised.presence_penalty = 0.5;
  penalised.frequency_penalty = 0.3;
  const DrawCase cases[] = {
      {"plain", 20, make(1.0, 0, 1.0, 0.0), false},
      {"temperature+top_k", 50, make(0.7, 8, 1.0, 0.0), false},
      {"top_p", 50, make(1.3, 0, 0.8, 0.0), false},
      {"min_p", 50, make(1.0, 0, 1.0, 0.05), false},
      {"all filters", 100, make(0.9, 20, 0.9, 0.02), false},
      {"penalties", 30, penalised, true},
  };
  const size_t draws = 200000;
  for (const DrawCase& c : cases) {
    std::vector<float> logits;
    OracleResult want;
    std::vector<int32_t> prompt, generated;
    do {
      logits = random_logits(rng, c.vocab, 1.5);
      prompt.clear();
      generated.clear();
      std::vector<double> effective = widen(logits);
      if (c.with_history) {
        std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(c.vocab) - 1);
        for (int i = 0; i < 8; ++i) prompt.push_back(id(rng));
        for (int i = 0; i < 8; ++i) generated.push_back(id(rng));
        // The penalty formulas, in float64, straight from their definitions.
        std::map<int32_t, int> count;
        for (int32_t g : generated) ++count[g];
        std::set<int32_t> seen(prompt.begin(), prompt.end());
        seen.insert(generated.begin(), generated.end());
        for (int32_t s : seen) {
          double& l = effective[s];
          l = l < 0 ? l * c.params.repetition_penalty : l / c.params.repetition_penalty;
        }
        for (auto [g, n] : count)
          effective[g] -= n * c.params.frequency_penalty + c.params.presence_penalty;
      }
      want = oracle_distribution(effective, {c.params.temperature, c.params.top_k, c.params.top_p,
                                             c.params.min_p});
    } while (want.margin < 1e-6);

    SamplingParams params = c.params;
    params.seed = rng();
    Sampler sampler(params, prompt);
    for (int32_t g : generated) sampler.accept(g);
    std::vector<size_t> hits(c.vocab, 0);
    for (size_t i = 0; i < draws; ++i) ++hits[sampler.sample(logits).token];

    for (size_t id = 0; id < c.vocab; ++id) {
      const auto it = want.probs.find(static_cast<int32_t>(id));
      const double p = it == want.probs.end() ? 0.0 : it->second;
      const double f = static_cast<double>(hits[id]) / static_cast<double>(draws);
      if (p == 0.0) {
        EXPECT_EQ(hits[id], 0u) << c.name << ": token " << id << " is outside the support";
      } else {
        EXPECT_LE(std::fabs(f - p), bernstein_bound(p, draws))
            << c.name << ": token " << id << " drawn with frequency " << f << ", probability " << p;
      }
    }
  }
}

} // namespace
} // namespace ninfer::test
