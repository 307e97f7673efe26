// Temperature, top-k, top-p and min-p: from logits to the distribution a token is drawn from.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ninfer/support/error.hpp"
#include "ninfer/sampling/logits_processing.hpp"

namespace ninfer {
namespace {

void check_logits(std::span<const float> logits) {
  if (logits.empty()) throw Error("sampling: the logits row is empty");
  for (size_t i = 0; i < logits.size(); ++i)
    // -inf is a legitimate mask; NaN and +inf are broken model output.
    if (std::isnan(logits[i]) || logits[i] == std::numeric_limits<float>::infinity())
      throw Error(fmt::format("sampling: logit of token {} is {} (the model produced invalid "
                              "output)",
                              i, logits[i]));
}

// Number of leading entries of order[0..k) that top-p keeps, ranked most likely first: rank r
// is kept while the mass before it is < target. Ranks only as far as needed — a head of 64,
// then 8x more each round (nth_element + sort of the new part only) — so a peaked
// distribution over a 150k vocabulary costs O(V), not a full sort.
template <class Before>
size_t top_p_count(std::vector<TokenId>& order, size_t k, const std::vector<double>& w,
                   double target, Before before) {
  size_t ranked = 0, m = std::min<size_t>(k, 64), r = 0;
  double mass = 0;
  for (;;) {
    if (m < k) std::nth_element(order.begin() + ranked, order.begin() + m, order.begin() + k, before);
    std::sort(order.begin() + ranked, order.begin() + m, before);
    for (; r < m && mass < target; ++r) mass += w[order[r]];
    if (r < m || m == k) return std::max<size_t>(r, 1);
    ranked = m;
    m = std::min(k, m * 8);
  }
}

// Renormalises unnormalised weights into the result.
std::vector<Candidate> normalised(std::vector<Candidate> c) {
  double total = 0;
  for (const Candidate& x : c) total += x.prob;
  for (Candidate& x : c) x.prob /= total;
  return c;
}

} // namespace

TokenId argmax(std::span<const float> logits) {
  check_logits(logits);
  // max_element returns the first of equal maxima: the lowest id.
  return static_cast<TokenId>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::vector<Candidate> filtered_distribution(std::span<const float> logits, const FilterParams& p) {
  check_logits(logits);
  if (!(p.temperature > 0)) throw Error("sampling: filtered_distribution needs temperature > 0");
  const size_t vocab = logits.size();

  std::vector<double> z(vocab);
  for (size_t i = 0; i < vocab; ++i) z[i] = static_cast<double>(logits[i]) / p.temperature;
  const size_t k = (p.top_k > 0 && static_cast<size_t>(p.top_k) < vocab) ? p.top_k : vocab;
  // min-p keeps p_i >= min_p * p_max, i.e. z_i - z_max >= log(min_p): no normalisation needed.
  const auto min_p_floor = [&](double zmax) {
    return p.min_p > 0 ? zmax + std::log(p.min_p) : -std::numeric_limits<double>::infinity();
  };
  // Tokens of probability exactly 0 (masked with -inf, or underflowed) never enter the
  // result: the draw's rounding fallback must never land on one.

  if (k == vocab && p.top_p >= 1.0) {
    // No ranking needed: at most min-p, a threshold. One pass in id order.
    const double zmax = *std::max_element(z.begin(), z.end());
    if (std::isinf(zmax)) throw Error("sampling: every logit is -inf; there is no token to choose");
    const double floor = min_p_floor(zmax);
    std::vector<Candidate> out;
    out.reserve(vocab);
    for (size_t i = 0; i < vocab; ++i) {
      if (z[i] < floor) continue;
      const double w = std::exp(z[i] - zmax);
      if (w > 0) out.push_back({static_cast<TokenId>(i), w});
    }
    return normalised(std::move(out));
  }

  // Most likely first; equal logits in id order, so every choice below is deterministic.
  auto before = [&z](TokenId a, TokenId b) { return z[a] > z[b] || (z[a] == z[b] && a < b); };
  std::vector<TokenId> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  if (k < vocab) std::nth_element(order.begin(), order.begin() + k, order.end(), before);
  // order[0..k) is now the top-k set (unsorted).

  double zmax = -std::numeric_limits<double>::infinity();
  for (size_t r = 0; r < k; ++r) zmax = std::max(zmax, z[order[r]]);
  if (std::isinf(zmax)) throw Error("sampling: every logit is -inf; there is no token to choose");

  // top-p and min-p each keep a head of the ranked order; the result is the shorter head.
  // top-p measures mass in the top-k distribution (before min-p), as transformers does.
  size_t kept = k;
  if (p.top_p < 1.0) {
    std::vector<double> w(vocab, 0.0);
    double total = 0;
    for (size_t r = 0; r < k; ++r) total += w[order[r]] = std::exp(z[order[r]] - zmax);
    kept = top_p_count(order, k, w, p.top_p * total, before);
  }
  const double floor = min_p_floor(zmax);

  order.resize(kept);
  std::sort(order.begin(), order.end());
  std::vector<Candidate> out;
  out.reserve(kept);
  for (TokenId id : order) {
    if (z[id] < floor) continue;
    const double w = std::exp(z[id] - zmax);
    if (w > 0) out.push_back({id, w});
  }
  return normalised(std::move(out));
}

double log_sum_exp(std::span<const float> logits) {
  check_logits(logits);
  const double m = *std::max_element(logits.begin(), logits.end());
  if (std::isinf(m)) return m; // all -inf (or a +inf): nothing finite to normalise
  double s = 0;
  for (float l : logits) s += std::exp(static_cast<double>(l) - m);
  return m + std::log(s);
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, double lse, int64_t k) {
  const size_t n = std::min<size_t>(static_cast<size_t>(std::max<int64_t>(k, 0)), logits.size());
  std::vector<TokenId> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + n, order.end(), [&](TokenId a, TokenId b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::vector<TokenLogprob> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i)
    out.push_back({order[i], static_cast<float>(static_cast<double>(logits[order[i]]) - lse)});
  return out;
}

} // namespace ninfer
