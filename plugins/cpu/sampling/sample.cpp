// sample on the host (contract: ninfer/abi/ops/sample.h): the reference the CUDA variant must
// match id for id. It follows the contract's steps literally: rank with nth_element / sort, sum
// the fixed-point weights in 64-bit integers (exact, so the summation order cannot matter).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "common/cpu_ops.hpp"
#include "common/host_variant.hpp"
#include "ninfer/abi/ops/sample.h"
#include "ninfer/abi/ops/sample_math.h"
#include "common/parallel.hpp"

namespace ninfer::cpu_plugin {
namespace {

int32_t supports(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0 && s->dims[0] <= (1 << 30); }

struct RowResult {
  int32_t id;
  float logprob;
};

// The number of leading ranks of order[0..k) top-p keeps (mass before a rank < target), ranking
// only as far as needed: a head of 64, then 8x more per round.
template <class Before>
size_t top_p_head(std::vector<int32_t>& order, size_t k, const std::vector<uint64_t>& W, uint64_t target,
                  Before before) {
  size_t ranked = 0, m = std::min<size_t>(k, 64), r = 0;
  uint64_t mass = 0;
  for (;;) {
    if (m < k) std::nth_element(order.begin() + ranked, order.begin() + m, order.begin() + k, before);
    std::sort(order.begin() + ranked, order.begin() + m, before);
    for (; r < m && mass < target; ++r) mass += W[order[r]];
    if (r < m || m == k) return r;
    ranked = m;
    m = std::min(k, m * 8);
  }
}

RowResult sample_row(const float* l, int32_t V, const ninfer_sample_row& P) {
  bool bad = false;
  int32_t best = 0;
  for (int32_t j = 0; j < V; ++j) {
    bad |= std::isnan(l[j]) || l[j] == std::numeric_limits<float>::infinity();
    if (l[j] > l[best]) best = j;
  }
  const float m = l[best];
  if (bad || m == -std::numeric_limits<float>::infinity()) return {-1, NAN};
  double sum = 0;
  for (int32_t j = 0; j < V; ++j) sum += std::exp(double(l[j]) - m);
  const double lse = double(m) + std::log(sum);
  auto result = [&](int32_t id) { return RowResult{id, static_cast<float>(double(l[id]) - lse)}; };
  if (ninfer_sample_greedy(P.temperature)) return result(best);

  const double inv_t = 1.0 / P.temperature;
  const int shift = ninfer_sample_shift(V);
  std::vector<double> w(static_cast<size_t>(V));
  std::vector<uint64_t> W(static_cast<size_t>(V));
  for (int32_t j = 0; j < V; ++j) {
    w[j] = ninfer_sample_weight(l[j], m, inv_t);
    W[j] = ninfer_sample_fixed(w[j], shift);
  }
  const double min_p = std::min(P.min_p, 1.0);
  auto passes = [&](int32_t j) { return W[j] > 0 && !(P.min_p > 0 && w[j] < min_p); };

  const size_t k = (P.top_k > 0 && P.top_k < V) ? static_cast<size_t>(P.top_k) : static_cast<size_t>(V);
  const bool top_p = P.top_p < 1.0;
  std::vector<int32_t> kept;
  if (k == static_cast<size_t>(V) && !top_p) {
    for (int32_t j = 0; j < V; ++j)
      if (passes(j)) kept.push_back(j);
  } else {
    // Logit descending, ties by id ascending (float == treats -0 and +0 as equal).
    auto before = [l](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
    std::vector<int32_t> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    if (k < order.size()) std::nth_element(order.begin(), order.begin() + k, order.end(), before);
    size_t head = k;
    if (top_p) {
      uint64_t total = 0;
      for (size_t r = 0; r < k; ++r) total += W[order[r]];
      const double t = std::ceil(P.top_p * static_cast<double>(total));
      const uint64_t target = std::max<uint64_t>(1, t > 0 ? static_cast<uint64_t>(t) : 0);
      head = top_p_head(order, k, W, target, before);
    }
    for (size_t r = 0; r < head; ++r)
      if (passes(order[r])) kept.push_back(order[r]);
    std::sort(kept.begin(), kept.end());
  }

  uint64_t total = 0;
  for (int32_t j : kept) total += W[j];
  const uint64_t u = ninfer_sample_mulhi(ninfer_sample_draw(P.seed, P.counter), total);
  uint64_t cum = 0;
  for (int32_t j : kept) {
    cum += W[j];
    if (cum > u) return result(j);
  }
  return result(kept.back()); // unreachable: u < total
}

int32_t launch(const void*, const void* args, const ninfer_launch* l, void*, char*, size_t) {
  const auto& a = *static_cast<const ninfer_sample_args*>(args);
  parallel_for(l->token_end - l->token_begin, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t r = l->token_begin + i;
      const RowResult x = sample_row(a.logits + r * a.row_stride, a.vocab, a.params[r]);
      a.ids[r] = x.id;
      if (a.logprob) a.logprob[r] = x.logprob;
    }
  });
  return NINFER_OK;
}

} // namespace

int32_t register_sample(const ninfer_registrar* r) {
  static const ninfer_variant v = host_variant(NINFER_OP_SAMPLE, "reference", kF32Only, supports, launch);
  return r->add_variant(r->ctx, &v);
}

} // namespace ninfer::cpu_plugin
