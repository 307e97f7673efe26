// One norm_linear call's inputs (ninfer/abi/ops/norm_linear.h) on the host, strided and random,
// and the contract in float64: shared by the CPU op test (against the oracle) and the GPU op
// test (against the CPU plugin).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ninfer/abi/ops/norm_linear.h"
#include "ninfer/abi/plugin_abi.h"
#include "test_support.hpp"

namespace ninfer::test {

struct NormLinearShape {
  int32_t K, N; // in_features, weight rows
  bool gated;
  int32_t outs() const { return gated ? N / 2 : N; }
  std::string describe() const {
    return std::to_string(K) + "->" + std::to_string(N) + (gated ? " gated" : "");
  }
};

struct NormLinearCase {
  NormLinearShape shape;
  int64_t T;
  int32_t dtype, offset;
  float eps = 1e-6f;
  // Padded rows: the op must honour each stride (x rows stay 16-byte aligned, as vector loads
  // need them; the outputs are written element by element).
  int64_t x_stride() const { return shape.K + 8; }
  int64_t y_stride() const { return shape.outs() + 3; }
  int64_t normed_stride() const { return shape.K + 2; }
  std::vector<float> x, norm_w, w;  // w: the values the op sees (bf16-rounded for BF16)
  std::vector<uint16_t> w_bf16;

  static NormLinearCase random(std::mt19937_64& rng, const NormLinearShape& s, int64_t T, int32_t dtype,
                               int32_t offset) {
    NormLinearCase c{s, T, dtype, offset};
    std::normal_distribution<float> d(0.f, 1.f);
    c.x.resize(static_cast<size_t>(T * c.x_stride()));
    for (auto& v : c.x) v = 3.f * d(rng); // the residual stream is not unit-scale
    c.norm_w.resize(s.K);
    for (auto& v : c.norm_w) v = (offset ? 0.f : 1.f) + 0.3f * d(rng);
    c.w.resize(static_cast<size_t>(s.N) * s.K);
    c.w_bf16.resize(c.w.size());
    for (size_t i = 0; i < c.w.size(); ++i) {
      c.w[i] = d(rng) / std::sqrt(float(s.K));
      c.w_bf16[i] = to_bf16(c.w[i]);
      if (dtype == NINFER_DTYPE_BF16) c.w[i] = from_bf16(c.w_bf16[i]);
    }
    return c;
  }
  // The call's arguments on buffers holding x, norm_w and w (in the case's layout), writing y and
  // (unless null) the normed rows.
  ninfer_norm_linear_args args(const float* x_buf, const float* norm_w_buf, const void* w_buf, float* y,
                               float* normed) const {
    ninfer_norm_linear_args a{};
    a.x = x_buf;
    a.x_row_stride = x_stride();
    a.norm_w = norm_w_buf;
    a.eps = eps;
    a.norm_offset = offset;
    a.w = w_buf;
    a.w_dtype = dtype;
    a.y = y;
    a.y_row_stride = y_stride();
    a.normed = normed;
    a.normed_row_stride = normed_stride();
    a.tokens = T;
    a.in_features = shape.K;
    a.out_features = shape.N;
    a.gated = shape.gated ? 1 : 0;
    return a;
  }
  const void* w_data() const { return dtype == NINFER_DTYPE_F32 ? static_cast<const void*>(w.data()) : w_bf16.data(); }
  ninfer_shape planning_shape() const { return {T, {shape.K, shape.N, shape.gated ? 1 : 0, 0}, dtype}; }
  std::string describe() const {
    return shape.describe() + " T=" + std::to_string(T) + (dtype == NINFER_DTYPE_BF16 ? " bf16" : " f32") +
           " offset " + std::to_string(offset);
  }

  // The contract in double: y rows [T, outs] and normed rows [T, K], unpadded.
  void oracle(std::vector<double>& y, std::vector<double>& normed) const {
    const int32_t K = shape.K, N = shape.N, outs = shape.outs();
    y.assign(static_cast<size_t>(T * outs), 0.0);
    normed.assign(static_cast<size_t>(T * K), 0.0);
    std::vector<double> p(N);
    for (int64_t t = 0; t < T; ++t) {
      const float* xr = x.data() + t * x_stride();
      double ss = 0;
      for (int32_t k = 0; k < K; ++k) ss += double(xr[k]) * xr[k];
      const double r = 1.0 / std::sqrt(ss / K + eps);
      double* xn = normed.data() + t * K;
      for (int32_t k = 0; k < K; ++k) xn[k] = xr[k] * r * (offset + double(norm_w[k]));
      for (int32_t n = 0; n < N; ++n) {
        double acc = 0;
        for (int32_t k = 0; k < K; ++k) acc += xn[k] * w[static_cast<size_t>(n) * K + k];
        p[n] = acc;
      }
      for (int32_t n = 0; n < outs; ++n)
        y[t * outs + n] = shape.gated ? p[n] / (1 + std::exp(-p[n])) * p[n + outs] : p[n];
    }
  }
};

// The used part of strided rows [T, width] (row stride `stride`) and how many padding elements
// are no longer NaN (the op wrote outside its rows).
inline std::vector<float> unpad(const std::vector<float>& rows, int64_t T, int64_t width, int64_t stride,
                                size_t& written_padding) {
  std::vector<float> out;
  written_padding = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < stride; ++i) {
      const float v = rows[static_cast<size_t>(t * stride + i)];
      if (i < width)
        out.push_back(v);
      else if (!std::isnan(v))
        ++written_padding;
    }
  return out;
}

} // namespace ninfer::test
