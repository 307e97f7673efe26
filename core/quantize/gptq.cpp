#include "ninfer/quantize/gptq.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "dense_f64.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/support/row_threads.hpp"

namespace ninfer {

using quantize_detail::cholesky_upper;
using quantize_detail::gemm_acc;
using quantize_detail::reversed_inverse_of_transpose;

namespace {

// H[i][j] := H[order[i]][order[j]] in place: rows by following the permutation's cycles, then
// each row's columns through one row of scratch.
void permute_symmetric(std::vector<double>& h, int64_t k, const std::vector<int32_t>& order) {
  std::vector<double> tmp(static_cast<size_t>(k));
  std::vector<uint8_t> done(static_cast<size_t>(k), 0);
  auto row = [&](int64_t i) { return h.data() + i * k; };
  for (int64_t start = 0; start < k; ++start) {
    if (done[static_cast<size_t>(start)]) continue;
    std::copy(row(start), row(start) + k, tmp.begin());
    int64_t i = start;
    for (;;) {
      done[static_cast<size_t>(i)] = 1;
      const int64_t from = order[static_cast<size_t>(i)];
      if (from == start) {
        std::copy(tmp.begin(), tmp.end(), row(i));
        break;
      }
      std::copy(row(from), row(from) + k, row(i));
      i = from;
    }
  }
  for (int64_t i = 0; i < k; ++i) {
    double* r = row(i);
    for (int64_t j = 0; j < k; ++j) tmp[static_cast<size_t>(j)] = r[order[static_cast<size_t>(j)]];
    std::copy(tmp.begin(), tmp.end(), r);
  }
}

} // namespace

GptqFactor gptq_factor(std::vector<double> h, int64_t k, double damp, bool actorder, const std::string& what) {
  if (k < 1 || h.size() != static_cast<size_t>(k * k))
    throw Error(fmt::format("internal: {}: a Hessian of {} values for {} input channels", what, h.size(), k));
  for (size_t i = 0; i < h.size(); ++i)
    if (!std::isfinite(h[i]))
      throw Error(fmt::format("{}: the Hessian of its calibration inputs holds {} at [{}, {}]: the model's activations "
                              "overflowed on the calibration text",
                              what, h[i], static_cast<int64_t>(i) / k, static_cast<int64_t>(i) % k));
  GptqFactor f;
  f.cols = k;
  f.dead.assign(static_cast<size_t>(k), 0);
  for (int64_t i = 0; i < k; ++i)
    if (h[static_cast<size_t>(i * k + i)] == 0) {
      f.dead[static_cast<size_t>(i)] = 1;
      h[static_cast<size_t>(i * k + i)] = 1;
    }
  f.order.resize(static_cast<size_t>(k));
  std::iota(f.order.begin(), f.order.end(), 0);
  if (actorder) {
    std::stable_sort(f.order.begin(), f.order.end(), [&](int32_t a, int32_t b) {
      return h[static_cast<size_t>(a) * k + a] > h[static_cast<size_t>(b) * k + b];
    });
    permute_symmetric(h, k, f.order);
  }
  double mean = 0;
  for (int64_t i = 0; i < k; ++i) mean += h[static_cast<size_t>(i * k + i)];
  f.lambda = damp * mean / static_cast<double>(k);
  for (int64_t i = 0; i < k; ++i) h[static_cast<size_t>(i * k + i)] += f.lambda;
  // The upper Cholesky factor of H⁻¹ without forming H⁻¹: with J the reversal, J H J = Rᵀ R
  // (R upper), so H = (J Rᵀ J)(J R J) and H⁻¹ = Uᵀ U for U = J (Rᵀ)⁻¹ J, which is upper.
  // One factorisation and one triangular inverse instead of an inverse and a factorisation.
  std::reverse(h.begin(), h.end()); // element (i, j) to (k−1−i, k−1−j)
  if (const int64_t bad = cholesky_upper(h.data(), k); bad >= 0)
    throw Error(fmt::format("{}: its Hessian plus damping {} (damp {} of the mean diagonal) is not positive definite "
                            "at input channel {}; raise damp in the recipe",
                            what, f.lambda, damp, f.order[static_cast<size_t>(k - 1 - bad)]));
  f.u.resize(static_cast<size_t>(k * k));
  reversed_inverse_of_transpose(h.data(), f.u.data(), k);
  return f;
}

namespace {

// Where the block starting at position i1 ends: after `block` positions, or earlier at the start
// of a group that would not end inside the block (its grid must see every earlier update).
int64_t block_end(int64_t i1, int64_t cols, int64_t group, int64_t block) {
  int64_t end = std::min(cols, i1 + block);
  for (int64_t s = (i1 / group + 1) * group; s < end; s += group)
    if (s + group > end) return s;
  return end;
}

struct Job {
  const float* w;
  const GptqFactor& f;
  const GridSpec& spec;
  QuantizedWeights& m;
  const std::string& tensor;
  int64_t block;
};

// Rows [r0, r0 + nr): step 5 of gptq.hpp. Returns the first problem instead of throwing.
std::string solve_rows(const Job& job, int64_t r0, int64_t nr) {
  QuantizedWeights& m = job.m;
  const int64_t K = m.cols, G = m.groups_per_row(), group = m.group;
  const int offset = 1 << (m.bits - 1);
  const double* u = job.f.u.data();
  std::vector<double> wp(static_cast<size_t>(nr * K));
  for (int64_t r = 0; r < nr; ++r)
    for (int64_t i = 0; i < K; ++i) {
      const int32_t c = job.f.order[static_cast<size_t>(i)];
      wp[static_cast<size_t>(r * K + i)] = job.f.dead[static_cast<size_t>(c)] ? 0.0 : job.w[(r0 + r) * K + c];
    }
  std::vector<double> err(static_cast<size_t>(job.block * nr)); // [position in block][row]
  std::vector<GroupGrid> grids(static_cast<size_t>(nr));
  for (int64_t i1 = 0, i2; i1 < K; i1 = i2) {
    i2 = block_end(i1, K, group, job.block);
    for (int64_t i = i1; i < i2; ++i) {
      const int64_t g = i / group;
      if (i % group == 0)
        for (int64_t r = 0; r < nr; ++r) {
          const double* x = wp.data() + r * K + i;
          const auto [lo, hi] = std::minmax_element(x, x + group);
          GroupGrid& grid = grids[static_cast<size_t>(r)];
          if (std::string p = choose_grid(*lo, *hi, job.spec, grid); !p.empty())
            return fmt::format("{}: row {} group {} {}; leave this module unquantized or quantize it from a bf16 "
                               "source with --format compressed-tensors",
                               job.tensor, r0 + r, g, p);
          m.scales[static_cast<size_t>((r0 + r) * G + g)] = grid.scale;
          if (!m.zeros.empty()) m.zeros[static_cast<size_t>((r0 + r) * G + g)] = static_cast<uint8_t>(grid.zero);
        }
      const double* ui = u + i * K;
      const double d = ui[i];
      const int32_t c = job.f.order[static_cast<size_t>(i)];
      for (int64_t r = 0; r < nr; ++r) {
        double* x = wp.data() + r * K;
        const GroupGrid& grid = grids[static_cast<size_t>(r)];
        const int code = grid_code(x[i], grid, job.spec);
        const double e = (x[i] - grid_value(code, grid)) / d;
        err[static_cast<size_t>((i - i1) * nr + r)] = e;
        m.q[static_cast<size_t>((r0 + r) * K + c)] = static_cast<int8_t>(code - offset);
        for (int64_t j = i + 1; j < i2; ++j) x[j] -= e * ui[j];
      }
    }
    if (i2 < K) gemm_acc(wp.data() + i2, K, err.data(), nr, u + i1 * K + i2, K, nr, K - i2, i2 - i1, true);
  }
  return {};
}

} // namespace

QuantizedWeights gptq_quantize(const float* w, int64_t rows, int64_t cols, int64_t group, const GridSpec& spec,
                               const GptqFactor& f, const std::string& tensor, int64_t block) {
  if (spec.bits != 4 && spec.bits != 8) throw Error(fmt::format("{}: {} bits is not supported (4 or 8)", tensor, spec.bits));
  if (group < 1 || cols % group != 0)
    throw Error(fmt::format("{}: group size {} does not divide its {} input channels", tensor, group, cols));
  if (f.cols != cols)
    throw Error(fmt::format("internal: {} has {} input channels, its Hessian {}", tensor, cols, f.cols));
  if (block < 1) throw Error(fmt::format("internal: GPTQ block of {} columns", block));
  for (int64_t i = 0; i < rows * cols; ++i)
    if (!std::isfinite(w[i]))
      throw Error(fmt::format("{}: element [{}, {}] is {}; a weight must be finite to be quantized", tensor, i / cols,
                              i % cols, w[i]));
  QuantizedWeights m = QuantizedWeights::sized(rows, cols, group, spec.bits, spec.scale_dtype, spec.symmetric);
  bool permuted = false;
  for (int64_t i = 0; i < cols; ++i) permuted |= f.order[static_cast<size_t>(i)] != i;
  if (permuted) {
    m.g_idx.resize(static_cast<size_t>(cols));
    for (int64_t i = 0; i < cols; ++i) m.g_idx[static_cast<size_t>(f.order[static_cast<size_t>(i)])] = static_cast<int32_t>(i / group);
  }
  const Job job{w, f, spec, m, tensor, block};
  // Rows in slices: each slice streams U once, so wider slices read it fewer times.
  constexpr int64_t kSlice = 64;
  for_ranges(rows, threads_for(rows, static_cast<double>(cols) * cols / 2),
                              [&](int64_t begin, int64_t end) -> std::string {
                                for (int64_t r = begin; r < end; r += kSlice)
                                  if (std::string p = solve_rows(job, r, std::min(kSlice, end - r)); !p.empty()) return p;
                                return {};
                              });
  return m;
}

} // namespace ninfer
