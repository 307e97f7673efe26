#include <gtest/gtest.h>

#include "ninfer/abi/ops/rope.h"
#include "op_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

// Full (Qwen3) and 25% partial (Qwen3.5) rotary on strided head rows, positions up to the
// longest context Qwen3.5 supports.
TEST(RopeOp, RotatesHalfSplitPairsByPosition) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("rope");
  std::uniform_int_distribution<int32_t> pos_dist(0, 262143);
  for (auto [hd, rot, theta] : {std::tuple<int32_t, int32_t, double>{64, 64, 1e6}, {32, 8, 1e4}, {256, 64, 1e7}}) {
    const int32_t heads = 3;
    const int64_t T = 9, head_stride = hd + 4, token_stride = heads * head_stride + 1;
    auto x = randn(rng, T * token_stride);
    const auto before = x;
    std::vector<int32_t> pos(T);
    for (auto& p : pos) p = pos_dist(rng);
    pos[0] = 0;
    pos[1] = 1;
    ninfer_rope_args a{x.data(), token_stride, head_stride, pos.data(), T, heads, hd, rot, theta};
    be.run(NINFER_OP_ROPE, {T, {hd, heads, rot, 0}, NINFER_DTYPE_F32}, &a);
    std::vector<float> got;
    std::vector<double> want;
    const int half = rot / 2;
    for (int64_t t = 0; t < T; ++t)
      for (int h = 0; h < heads; ++h) {
        const int64_t at = t * token_stride + h * head_stride;
        for (int i = 0; i < hd; ++i) {
          double w = before[at + i];
          if (i < rot) {
            const int j = i % half;
            const double ang = pos[t] * std::pow(theta, -2.0 * j / rot);
            const double x1 = before[at + j], x2 = before[at + j + half];
            w = i < half ? x1 * std::cos(ang) - x2 * std::sin(ang) : x2 * std::cos(ang) + x1 * std::sin(ang);
          }
          want.push_back(w);
          got.push_back(x[at + i]);
        }
        for (int64_t i = hd; i < head_stride; ++i) ASSERT_EQ(x[at + i], before[at + i]);
      }
    const Mismatch m = compare(got, want, kFloat32Exact);
    EXPECT_TRUE(m.ok) << "head_dim " << hd << " rotary " << rot << ": " << m.describe();
  }
}
