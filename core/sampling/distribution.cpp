// Temperature, top-k, top-p and min-p: from logits to the distribution a token is drawn from.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ninfer/error.hpp"
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

// Number of leading entries of `order` (sorted most likely first, from index `sorted` on
// not yet sorted) kept by top-p: rank r is kept while the mass before it is < target.
// Sorts only as far as needed: a head of 64, then 8x more, so a peaked distribution over a
// 150k vocabulary costs O(V) rather than a full sort.
template <class Before>
size_t top_p_count(std::vector<TokenId>& order, size_t k, const std::vector<double>& w,
                   double target, Before before) {
  size_t m = std::min<size_t>(k, 64);
  for (;;) {
    std::partial_sort(order.begin(), order.begin() + m, order.begin() + k, before);
    double mass = 0;
    size_t r = 0;
    for (; r < m && mass < target; ++r) mass += w[order[r]];
    if (r < m || m == k) return std::max<size_t>(r, 1);
    m = std::min(k, m * 8);
  }
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
  // Most likely first; equal logits in id order, so every choice below is deterministic.
  auto before = [&z](TokenId a, TokenId b) { return z[a] > z[b] || (z[a] == z[b] && a < b); };

  std::vector<TokenId> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  const size_t k = (p.top_k > 0 && static_cast<size_t>(p.top_k) < vocab) ? p.top_k : vocab;
  if (k < vocab) std::nth_element(order.begin(), order.begin() + k, order.end(), before);
  // order[0..k) is now the top-k set (unsorted).

  double zmax = -std::numeric_limits<double>::infinity();
  for (size_t r = 0; r < k; ++r) zmax = std::max(zmax, z[order[r]]);
  if (std::isinf(zmax)) throw Error("sampling: every logit is -inf; there is no token to choose");

  std::vector<double> w(vocab, 0.0); // unnormalised probabilities, top-k set only
  double total = 0;
  for (size_t r = 0; r < k; ++r) total += w[order[r]] = std::exp(z[order[r]] - zmax);

  // top-p and min-p each keep a head of the sorted order; the result is the shorter head.
  // top-p measures mass in the top-k distribution (before min-p), as transformers does.
  size_t kept = k;
  if (p.top_p < 1.0) kept = top_p_count(order, k, w, p.top_p * total, before);
  if (p.min_p > 0.0) {
    // p_i >= min_p * p_max  <=>  z_i - z_max >= log(min_p): no normalisation involved.
    const double zmin = zmax + std::log(p.min_p);
    auto last = std::partition(order.begin(), order.begin() + kept,
                               [&](TokenId id) { return z[id] >= zmin; });
    kept = static_cast<size_t>(last - order.begin());
  }

  // Tokens whose probability is exactly 0 (masked with -inf, or underflowed) are not part of
  // the support: the draw's rounding fallback must never land on one.
  order.resize(static_cast<size_t>(
      std::remove_if(order.begin(), order.begin() + kept, [&](TokenId id) { return w[id] == 0.0; }) -
      order.begin()));
  std::sort(order.begin(), order.end());
  double kept_mass = 0;
  for (TokenId id : order) kept_mass += w[id];
  std::vector<Candidate> out;
  out.reserve(order.size());
  for (TokenId id : order) out.push_back({id, w[id] / kept_mass});
  return out;
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
