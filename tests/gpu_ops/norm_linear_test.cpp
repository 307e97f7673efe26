// norm_linear on the CUDA plugin (one token: the decode form of a block's first projection)
// against the CPU reference plugin, on the real models' projections and odd widths: every
// route, float32 and bf16 weights, both norm forms, gated and not, with the normed rows.
// Tolerance: `gpu-f32-vs-cpu-reference` per element (float32 sums in another order).
#include <gtest/gtest.h>

#include "gpu_op_env.hpp"
#include "norm_linear_case.hpp"
#include "op_routes.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

// Qwen3-8B q|k|v and gate|up, Qwen3.5-27B GDN qkv|z and gate|up, and widths that leave a CTA
// partly empty (odd outputs, a half of 35 rows, a K of one 16-byte vector; gemv_4warps's CTA has 2
// gated / 4 plain outputs, and its K quarters of 40 and 8 leave whole slices empty). K = 2056
// (257 bf16 / 514 f32 vectors) ends gemv_4warps's quarters mid-step, the last one shorter, after
// more than one round of loads. gemv_4warps_one_wave's one wave of resident CTAs walks several row
// blocks each on the model shapes (6144 blocks of 2 gated pairs on the 8B's gate|up) and one on the
// small ones.
const NormLinearShape kShapes[] = {{4096, 6144, false}, {4096, 24576, true}, {5120, 16384, false},
                                   {5120, 34816, true}, {136, 70, true},     {40, 9, false},
                                   {8, 3, false},       {2056, 22, true},    {2056, 7, false}};

struct Outputs {
  std::vector<float> y, normed;
};

Outputs run(Backend& be, const std::string& route, const NormLinearCase& c) {
  DeviceBuffer x = put(be, c.x), nw = put(be, c.norm_w);
  DeviceBuffer w = c.dtype == NINFER_DTYPE_F32 ? put(be, c.w) : put(be, c.w_bf16);
  const size_t ny = static_cast<size_t>(c.T * c.y_stride()), nn = static_cast<size_t>(c.T * c.normed_stride());
  DeviceBuffer y = poisoned_buffer(be, ny), normed = poisoned_buffer(be, nn);
  const ninfer_norm_linear_args a = c.args(x.as<float>(), nw.as<float>(), w.data(), y.as<float>(), normed.as<float>());
  be.reserve_workspace(NINFER_OP_NORM_LINEAR, c.planning_shape()); // the CPU reference needs one
  run_route(be, NINFER_OP_NORM_LINEAR, route, c.planning_shape(), &a);
  return {get<float>(be, y, ny), get<float>(be, normed, nn)};
}

} // namespace

TEST(NormLinearGpu, EveryRouteMatchesTheCpuReference) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu norm_linear");
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  op_routes(*gpu, NINFER_OP_NORM_LINEAR); // fails the test when the plugin has no variant at all
  for (const NormLinearShape& s : kShapes)
    for (int32_t dtype : {NINFER_DTYPE_F32, NINFER_DTYPE_BF16})
      for (int32_t offset : {0, 1}) {
        const NormLinearCase c = NormLinearCase::random(rng, s, 1, dtype, offset);
        const Outputs want = run(*cpu, "", c);
        size_t stray = 0;
        const auto want_y = widen(unpad(want.y, 1, s.outs(), c.y_stride(), stray));
        const auto want_n = widen(unpad(want.normed, 1, s.K, c.normed_stride(), stray));
        const ninfer_shape planned = c.planning_shape();
        for (const std::string& route : op_routes(*gpu, NINFER_OP_NORM_LINEAR, &planned)) {
          const Outputs got = run(*gpu, route, c);
          const std::string what = c.describe() + ", " + route_name(route);
          const Mismatch m = compare(unpad(got.y, 1, s.outs(), c.y_stride(), stray), want_y, kGpuVsCpuF32);
          EXPECT_TRUE(m.ok) << what << ": " << m.describe();
          EXPECT_EQ(stray, 0u) << what << ": wrote y padding";
          const Mismatch mn = compare(unpad(got.normed, 1, s.K, c.normed_stride(), stray), want_n, kGpuVsCpuF32);
          EXPECT_TRUE(mn.ok) << what << " normed rows: " << mn.describe();
          EXPECT_EQ(stray, 0u) << what << ": wrote normed padding";
        }
      }
}

// The planner takes the fused op for one token only; batches go through rms_norm + a batch GEMV.
TEST(NormLinearGpu, PlannedForOneTokenOnly) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto gpu = make_cuda_backend();
  EXPECT_TRUE(gpu->has_variant(NINFER_OP_NORM_LINEAR, {1, {4096, 24576, 1, 0}, NINFER_DTYPE_BF16}));
  EXPECT_FALSE(gpu->has_variant(NINFER_OP_NORM_LINEAR, {2, {4096, 24576, 1, 0}, NINFER_DTYPE_BF16}));
  EXPECT_FALSE(gpu->has_variant(NINFER_OP_NORM_LINEAR, {1, {4100, 24576, 1, 0}, NINFER_DTYPE_BF16}));
}
