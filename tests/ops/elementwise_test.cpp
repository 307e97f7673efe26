#include <gtest/gtest.h>

#include "ninfer/abi/ops/sigmoid_gate.h"
#include "ninfer/abi/ops/silu_mul.h"
#include "op_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

TEST(SiluMulOp, GateHalfTimesUpHalfOfAFusedProjection) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("silu_mul");
  const int32_t width = 37;
  const int64_t T = 6, gu_stride = 2 * width + 1, out_stride = width + 2;
  auto gu = randn(rng, T * gu_stride, 3.f);
  auto out = poisoned(T * out_stride);
  ninfer_silu_mul_args a{gu.data(), gu_stride, gu.data() + width, gu_stride, out.data(), out_stride, T, width};
  be.run(NINFER_OP_SILU_MUL, {T, {width, 0, 0, 0}, NINFER_DTYPE_F32}, &a);
  std::vector<float> got;
  std::vector<double> want;
  for (int64_t t = 0; t < T; ++t)
    for (int i = 0; i < width; ++i) {
      const double g = gu[t * gu_stride + i], u = gu[t * gu_stride + width + i];
      want.push_back(g / (1 + std::exp(-g)) * u);
      got.push_back(out[t * out_stride + i]);
    }
  const Mismatch m = compare(got, want, kFloat32Exact);
  EXPECT_TRUE(m.ok) << m.describe();
}

// The gate of head h lies right after its query in Qwen3.5's q_proj output.
TEST(SigmoidGateOp, ScalesEachHeadByItsInterleavedGate) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("sigmoid_gate");
  const int32_t hd = 8, heads = 3;
  const int64_t T = 5, xs = heads * hd, qs = heads * 2 * hd + 4;
  auto x = randn(rng, T * xs), q = randn(rng, T * qs, 3.f);
  const auto before = x;
  ninfer_sigmoid_gate_args a{x.data(), xs, q.data() + hd, qs, 2 * hd, T, heads, hd};
  be.run(NINFER_OP_SIGMOID_GATE, {T, {hd, heads, 0, 0}, NINFER_DTYPE_F32}, &a);
  std::vector<double> want;
  for (int64_t t = 0; t < T; ++t)
    for (int h = 0; h < heads; ++h)
      for (int d = 0; d < hd; ++d)
        want.push_back(before[t * xs + h * hd + d] / (1 + std::exp(-double(q[t * qs + h * 2 * hd + hd + d]))));
  const Mismatch m = compare(x, want, kFloat32Exact);
  EXPECT_TRUE(m.ok) << m.describe();
}
