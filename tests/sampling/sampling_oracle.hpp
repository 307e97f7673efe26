// Float64 reference for the sampler, written from the definitions (full sort, explicit
// renormalisation after each filter, the way transformers' warpers chain), independent of
// the implementation's partial sorts and log-space min-p test.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <set>
#include <vector>

namespace ninfer::test {

struct OracleParams {
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  double min_p = 0.0;
};

struct OracleResult {
  std::map<int32_t, double> probs; // kept id -> renormalised probability
  // Smallest distance between a threshold and the quantity compared with it; inputs that
  // land closer than rounding could flip are redrawn by the tests.
  double margin = INFINITY;
};

inline std::vector<double> softmax(const std::vector<double>& z) {
  const double m = *std::max_element(z.begin(), z.end());
  std::vector<double> p(z.size());
  double s = 0;
  for (size_t i = 0; i < z.size(); ++i) s += p[i] = std::exp(z[i] - m);
  for (double& v : p) v /= s;
  return p;
}

inline OracleResult oracle_distribution(const std::vector<double>& logits, const OracleParams& o) {
  const size_t n = logits.size();
  std::vector<int32_t> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  std::vector<double> z(n);
  for (size_t i = 0; i < n; ++i) z[i] = logits[i] / o.temperature;
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return z[a] > z[b]; });

  OracleResult out;
  if (o.top_k > 0 && static_cast<size_t>(o.top_k) < n) ids.resize(o.top_k);

  auto probs_of = [&](const std::vector<int32_t>& set) {
    std::vector<double> zz;
    for (int32_t id : set) zz.push_back(z[id]);
    return softmax(zz);
  };

  if (o.top_p < 1.0) {
    const std::vector<double> p = probs_of(ids);
    double before = 0;
    size_t keep = 0;
    for (size_t r = 0; r < ids.size(); ++r) {
      out.margin = std::min(out.margin, std::fabs(before - o.top_p));
      if (before >= o.top_p) break;
      before += p[r];
      keep = r + 1;
    }
    ids.resize(keep);
  }
  if (o.min_p > 0.0) {
    const std::vector<double> p = probs_of(ids);
    const double pmax = *std::max_element(p.begin(), p.end());
    std::vector<int32_t> kept;
    for (size_t r = 0; r < ids.size(); ++r) {
      out.margin = std::min(out.margin, std::fabs(p[r] / pmax - o.min_p));
      if (p[r] >= o.min_p * pmax) kept.push_back(ids[r]);
    }
    ids = kept;
  }
  const std::vector<double> p = probs_of(ids);
  for (size_t r = 0; r < ids.size(); ++r)
    if (p[r] > 0) out.probs[ids[r]] = p[r]; // the support: tokens that can be drawn
  return out;
}

} // namespace ninfer::test
