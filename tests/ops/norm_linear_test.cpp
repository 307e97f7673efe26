// norm_linear on the CPU reference plugin against the float64 contract: odd and model-like
// widths, gated and not, both norm forms, float32 and bf16 weights, with and without the
// normed rows, strided rows, poisoned outputs.
#include <gtest/gtest.h>

#include "norm_linear_case.hpp"
#include "op_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

const NormLinearShape kShapes[] = {{64, 48, false}, {136, 70, true}, {40, 9, false}, {256, 200, true}, {7, 6, true}};

} // namespace

TEST(NormLinear, MatchesTheFloat64Contract) {
  auto rng = fresh_rng("norm_linear");
  Backend be = cpu_backend();
  for (const NormLinearShape& s : kShapes)
    for (int64_t T : {1, 3, 17})
      for (int32_t dtype : {NINFER_DTYPE_F32, NINFER_DTYPE_BF16})
        for (int32_t offset : {0, 1})
          for (bool keep_normed : {false, true}) {
            const NormLinearCase c = NormLinearCase::random(rng, s, T, dtype, offset);
            std::vector<float> y = poisoned(static_cast<size_t>(T * c.y_stride()));
            std::vector<float> normed = poisoned(static_cast<size_t>(T * c.normed_stride()));
            const ninfer_norm_linear_args a =
                c.args(c.x.data(), c.norm_w.data(), c.w_data(), y.data(), keep_normed ? normed.data() : nullptr);
            be.reserve_workspace(NINFER_OP_NORM_LINEAR, c.planning_shape());
            be.run(NINFER_OP_NORM_LINEAR, c.planning_shape(), &a);

            std::vector<double> want_y, want_normed;
            c.oracle(want_y, want_normed);
            const std::string what = c.describe() + (keep_normed ? " +normed" : "");
            size_t stray = 0;
            const Mismatch m = compare(unpad(y, T, s.outs(), c.y_stride(), stray), want_y, kFloat32Exact);
            EXPECT_TRUE(m.ok) << what << ": " << m.describe();
            EXPECT_EQ(stray, 0u) << what << ": wrote y padding";
            if (keep_normed) {
              const Mismatch mn = compare(unpad(normed, T, s.K, c.normed_stride(), stray), want_normed, kFloat32Exact);
              EXPECT_TRUE(mn.ok) << what << " normed rows: " << mn.describe();
              EXPECT_EQ(stray, 0u) << what << ": wrote normed padding";
            } else {
              for (float v : normed) ASSERT_TRUE(std::isnan(v)) << what << ": wrote normed rows it was not given";
            }
          }
}
