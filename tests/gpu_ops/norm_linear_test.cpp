// norm_linear on the CUDA plugin against the CPU reference plugin and a float64 oracle, on the
// real models' projections and odd widths, both norm forms, gated and not, with the normed rows:
//   - one token (the decode form of a block's first projection): every route, float32 and bf16
//     weights. Tolerance: `gpu-f32-vs-cpu-reference` per element (float32 sums in another order).
//   - batches and mixed-step chunks (2 to 256 tokens, bf16 weights): the `cublaslt` variant and
//     the planner's choice. They round each normed row to bf16 for the tensor-core product
//     (linear/norm_linear_cublaslt.cu), so the oracle does too: the float64 normed row rounded to
//     float32 and then to bf16, the product and SwiGLU in float64. Tolerance `bf16-rows-emulated`:
//     relative L2 over the whole output <= 2^-12. What is left after the emulation is float32
//     accumulation (~1e-6) and the rare element whose float32 norm (rsqrtf, another summation
//     order) lands on the other side of a bf16 rounding boundary, one bf16 step of one input:
//     ~1e-5 of the output's norm for the widths here. Without the emulation (x kept in float32, or
//     rounded but normed wrongly) the error is ~0.42 * 2^-8 = 1.6e-3, seven times the bound.
#include <gtest/gtest.h>

#include <cmath>

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

// The oracle of a route that rounds each normed row to bf16 (see the header): y rows [T, outs].
std::vector<double> bf16_rows_oracle(const NormLinearCase& c) {
  std::vector<double> exact_y, normed;
  c.oracle(exact_y, normed);
  const NormLinearShape& s = c.shape;
  std::vector<double> y(static_cast<size_t>(c.T * s.outs())), xb(s.K), p(s.N);
  for (int64_t t = 0; t < c.T; ++t) {
    for (int32_t k = 0; k < s.K; ++k)
      xb[k] = from_bf16(to_bf16(static_cast<float>(normed[static_cast<size_t>(t * s.K + k)])));
    for (int32_t n = 0; n < s.N; ++n) {
      double acc = 0;
      for (int32_t k = 0; k < s.K; ++k) acc += xb[k] * c.w[static_cast<size_t>(n) * s.K + k];
      p[n] = acc;
    }
    for (int32_t n = 0; n < s.outs(); ++n)
      y[static_cast<size_t>(t * s.outs() + n)] = s.gated ? p[n] / (1 + std::exp(-p[n])) * p[n + s.outs()] : p[n];
  }
  return y;
}

// `bf16-rows-emulated` (see the header): relative L2 of the whole output, every element finite.
constexpr double kBf16RowsEmulated = 1.0 / 4096;

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

// Batches and mixed-step chunks: the `cublaslt` variant forced and the planner's choice (on the
// shipped tables, cublaslt for bf16 weights, docs/cuda-pointwise-linear.md), with the case's
// padded strides and a fresh NaN-poisoned output; the token counts include both ends of the
// variant's range. The 8B and 27B projections at a mixed step's sizes, the odd widths at every size.
TEST(NormLinearGpu, BatchesMatchTheBf16RowsOracle) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu norm_linear batches");
  auto gpu = make_cuda_backend();
  struct Batch {
    NormLinearShape shape;
    std::vector<int64_t> tokens;
  };
  const Batch batches[] = {{{4096, 6144, false}, {2, 17}},      {{4096, 24576, true}, {5}},
                           {{5120, 34816, true}, {3}},          {{136, 70, true}, {2, 9, 100, 256}},
                           {{40, 9, false}, {2, 33, 256}},      {{2056, 22, true}, {17, 256}},
                           {{2056, 7, false}, {5, 128}}};
  for (const Batch& b : batches)
    for (int64_t T : b.tokens)
      for (int32_t offset : {0, 1}) {
        const NormLinearCase c = NormLinearCase::random(rng, b.shape, T, NINFER_DTYPE_BF16, offset);
        const std::vector<double> want_y = bf16_rows_oracle(c);
        std::vector<double> unused, want_n;
        c.oracle(unused, want_n);
        const ninfer_shape planned = c.planning_shape();
        const std::string chosen = gpu->plan(NINFER_OP_NORM_LINEAR, planned).variant;
        for (const std::string route : {std::string("cublaslt"), std::string()}) {
          if (route.empty() && chosen != "cublaslt") continue; // another card's table: not this oracle's route
          const Outputs got = run(*gpu, route, c);
          const std::string what = c.describe() + ", " + route_name(route);
          size_t stray = 0;
          const Mismatch my =
              compare_rel_l2(unpad(got.y, T, b.shape.outs(), c.y_stride(), stray), want_y, kBf16RowsEmulated);
          EXPECT_TRUE(my.ok) << what << ": bf16-rows-emulated (relative L2 as got, bound as want): " << my.describe();
          EXPECT_EQ(stray, 0u) << what << ": wrote y padding";
          const Mismatch mn = compare(unpad(got.normed, T, b.shape.K, c.normed_stride(), stray), want_n, kGpuVsCpuF32);
          EXPECT_TRUE(mn.ok) << what << " normed rows: " << mn.describe();
          EXPECT_EQ(stray, 0u) << what << ": wrote normed padding";
        }
      }
}

// One token takes the GEMVs; 2 to 256 tokens of bf16 weights the cuBLASLt variant; float32
// weights, quantized ones and longer calls no fused variant (the core runs rms_norm + linear).
TEST(NormLinearGpu, FusedForOneTokenAndForBf16Batches) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto gpu = make_cuda_backend();
  EXPECT_TRUE(gpu->has_variant(NINFER_OP_NORM_LINEAR, {1, {4096, 24576, 1, 0}, NINFER_DTYPE_BF16}));
  EXPECT_TRUE(gpu->has_variant(NINFER_OP_NORM_LINEAR, {2, {4096, 24576, 1, 0}, NINFER_DTYPE_BF16}));
  EXPECT_TRUE(gpu->has_variant(NINFER_OP_NORM_LINEAR, {256, {4096, 24576, 1, 0}, NINFER_DTYPE_BF16}));
  EXPECT_FALSE(gpu->has_variant(NINFER_OP_NORM_LINEAR, {257, {4096, 24576, 1, 0}, NINFER_DTYPE_BF16}));
  EXPECT_FALSE(gpu->has_variant(NINFER_OP_NORM_LINEAR, {2, {4096, 24576, 1, 0}, NINFER_DTYPE_F32}));
  EXPECT_FALSE(gpu->has_variant(NINFER_OP_NORM_LINEAR, {2, {4096, 24575, 1, 0}, NINFER_DTYPE_BF16}));
  EXPECT_FALSE(gpu->has_variant(NINFER_OP_NORM_LINEAR, {1, {4100, 24576, 1, 0}, NINFER_DTYPE_BF16}));
}
