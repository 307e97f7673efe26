// draft_accept against its contract: per sequence, the longest prefix of its drafts that the
// model's picks repeat, and the row it keeps.
#include <gtest/gtest.h>

#include "ninfer/abi/ops/draft_accept.h"
#include "ninfer/abi/ops/sample.h"
#include "op_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

struct Round {
  int32_t seqs, drafts;
  std::vector<int32_t> ids, picks; // [seqs * (drafts + 1)]
};

// The contract's definition, written out.
std::pair<std::vector<int32_t>, std::vector<int32_t>> oracle(const Round& r) {
  std::vector<int32_t> accepted, keep;
  const int32_t D = r.drafts + 1;
  for (int32_t i = 0; i < r.seqs; ++i) {
    int32_t n = 0;
    for (int32_t j = 0; j < r.drafts; ++j) {
      if (r.ids[i * D + 1 + j] != r.picks[i * D + j]) break;
      n = j + 1;
    }
    accepted.push_back(n);
    keep.push_back(i * D + n);
  }
  return {accepted, keep};
}

} // namespace

// Random rounds over a 4-token vocabulary (so drafts often agree, at every depth), K = 1..5, and
// a row holding NaN (pick -1) that must stop acceptance even against a draft of -1.
TEST(DraftAcceptOp, KeepsTheLongestAgreeingPrefix) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("draft_accept");
  std::uniform_int_distribution<int32_t> tok(0, 3);
  std::vector<int64_t> seen(6, 0);
  for (int32_t K = 1; K <= 5; ++K)
    for (int rep = 0; rep < 50; ++rep) {
      Round r{1 + rep % 4, K, {}, {}};
      const size_t n = size_t(r.seqs) * (K + 1);
      for (size_t i = 0; i < n; ++i) {
        r.ids.push_back(tok(rng));
        // Picks agree with the next draft more often than not, so long prefixes occur.
        r.picks.push_back(tok(rng) == 0 ? tok(rng) : -2);
      }
      for (int32_t i = 0; i < r.seqs; ++i)
        for (int32_t j = 0; j < K; ++j)
          if (r.picks[i * (K + 1) + j] == -2) r.picks[i * (K + 1) + j] = r.ids[i * (K + 1) + 1 + j];
      for (auto& p : r.picks) p = p == -2 ? tok(rng) : p;
      if (rep == 7) {
        r.ids[1] = -1;
        r.picks[0] = -1;
      }
      std::vector<int32_t> accepted(size_t(r.seqs), -7), keep(size_t(r.seqs), -7);
      const ninfer_draft_accept_args a{r.ids.data(), r.picks.data(), accepted.data(), keep.data(), r.seqs, K};
      be.run(NINFER_OP_DRAFT_ACCEPT, {r.seqs, {K, 0, 0, 0}, NINFER_DTYPE_F32}, &a);
      auto [want_accepted, want_keep] = oracle(r);
      if (rep == 7) {
        want_accepted[0] = 0;
        want_keep[0] = 0;
      }
      EXPECT_EQ(accepted, want_accepted) << "K " << K << " round " << rep;
      EXPECT_EQ(keep, want_keep) << "K " << K << " round " << rep;
      for (int32_t x : accepted) ++seen[static_cast<size_t>(std::clamp(x, 0, 5))];
    }
  for (size_t n = 0; n <= 5; ++n) EXPECT_GT(seen[n], 0) << "no sequence accepted " << n << " drafts";
}

namespace {

// Draws of the acceptance test below: enough that the acceptance rate's standard deviation is
// 1.3e-3 and the smallest expected bin of the remainder holds ~3,000 draws.
constexpr int64_t kDraws = 120000;
constexpr int64_t kRowsPerCall = 4000;
// Deviations allowed in standard deviations (acceptance) and, for the chi-square statistics, in
// standard deviations of the chi-square distribution above its mean (2 x df variance): a
// correct op fails a fresh seed with a chance below 1e-5.
constexpr double kAcceptanceSigmas = 4.5;
constexpr double kChiSquareSigmas = 6.0;

double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& p, int64_t n) {
  double c = 0;
  for (size_t j = 0; j < counts.size(); ++j)
    if (p[j] > 0) c += (counts[j] - n * p[j]) * (counts[j] - n * p[j]) / (n * p[j]);
  return c;
}

bool chi_square_passes(double c, int df) { return c < df + kChiSquareSigmas * std::sqrt(2.0 * df); }

} // namespace

// Speculative sampling of a point-mass draft (docs/speculative.md): the sample op picks after the
// verified row and draft_accept keeps the draft x when the pick equals it. Over 120,000 seeded
// draws on a 6-token vocabulary that keeps x with probability p(x), the rejected draws follow p
// with x removed (chi-square; x itself never), and every token, kept or drawn, follows p: the
// output distribution is the model's. Against p with x left in, the rejected draws fail the same
// chi-square: the test can tell the two apart.
TEST(SpeculativeSampling, KeepsADraftWithItsProbabilityAndDrawsTheRestFromTheRemainder) {
  Backend be = cpu_backend();
  const std::vector<float> row{2.0f, 1.2f, 0.5f, 0.0f, -0.7f, -1.5f};
  const int32_t V = static_cast<int32_t>(row.size()), draft = 1;
  const double temperature = 0.8;
  std::vector<double> p(static_cast<size_t>(V));
  double z = 0;
  for (int32_t j = 0; j < V; ++j) z += p[static_cast<size_t>(j)] = std::exp(row[static_cast<size_t>(j)] / temperature);
  for (double& x : p) x /= z;
  std::vector<float> logits;
  for (int64_t r = 0; r < kRowsPerCall; ++r) logits.insert(logits.end(), row.begin(), row.end());
  int64_t accepted = 0;
  std::vector<int64_t> rejected(static_cast<size_t>(V), 0), all(static_cast<size_t>(V), 0);
  for (int64_t first = 0; first < kDraws; first += kRowsPerCall) {
    std::vector<ninfer_sample_row> params;
    for (int64_t r = 0; r < kRowsPerCall; ++r)
      params.push_back({temperature, 1.0, 0.0, 17, static_cast<uint64_t>(first + r), 0, 0});
    std::vector<int32_t> picks(static_cast<size_t>(kRowsPerCall) * 2, 0), ids(picks.size(), draft);
    // Row 2r: the verified row's pick (the sample op's); row 2r + 1: the one after it (unused).
    std::vector<int32_t> sampled(static_cast<size_t>(kRowsPerCall), -7);
    const ninfer_sample_args s{logits.data(), V, params.data(), sampled.data(), nullptr, kRowsPerCall, V};
    be.run(NINFER_OP_SAMPLE, {kRowsPerCall, {V, 0, 0, 0}, NINFER_DTYPE_F32}, &s);
    for (int64_t r = 0; r < kRowsPerCall; ++r) picks[static_cast<size_t>(2 * r)] = sampled[static_cast<size_t>(r)];
    std::vector<int32_t> acc(static_cast<size_t>(kRowsPerCall), -7);
    const ninfer_draft_accept_args a{ids.data(), picks.data(), acc.data(), nullptr,
                                     static_cast<int32_t>(kRowsPerCall), 1};
    be.run(NINFER_OP_DRAFT_ACCEPT, {kRowsPerCall, {1, 0, 0, 0}, NINFER_DTYPE_F32}, &a);
    for (int64_t r = 0; r < kRowsPerCall; ++r) {
      const int32_t got = sampled[static_cast<size_t>(r)];
      ASSERT_GE(got, 0);
      if (acc[static_cast<size_t>(r)] == 1) {
        ++accepted;
        ++all[static_cast<size_t>(draft)];
      } else {
        ++rejected[static_cast<size_t>(got)];
        ++all[static_cast<size_t>(got)];
      }
    }
  }
  const double px = p[static_cast<size_t>(draft)];
  const double rate = static_cast<double>(accepted) / kDraws;
  EXPECT_NEAR(rate, px, kAcceptanceSigmas * std::sqrt(px * (1 - px) / kDraws));
  EXPECT_EQ(rejected[static_cast<size_t>(draft)], 0) << "a rejected draw equal to the draft";
  std::vector<double> rest = p;
  rest[static_cast<size_t>(draft)] = 0;
  for (double& x : rest) x /= 1 - px;
  const int64_t n_rejected = kDraws - accepted;
  const double c_rest = chi_square(rejected, rest, n_rejected), c_all = chi_square(all, p, kDraws);
  EXPECT_TRUE(chi_square_passes(c_rest, V - 2)) << "rejected draws against p without the draft: " << c_rest;
  EXPECT_TRUE(chi_square_passes(c_all, V - 1)) << "every token against p: " << c_all;
  // p with the draft's mass left in: what a rule that draws the correction from p again gives.
  EXPECT_FALSE(chi_square_passes(chi_square(rejected, p, n_rejected), V - 1))
      << "the rejected draws fit p with the draft left in too: the test has no power";
  std::printf("acceptance %.4f (p(draft) %.4f), chi-square of the rest %.2f (df %d), of all %.2f (df %d)\n", rate, px,
              c_rest, V - 2, c_all, V - 1);
}
