// gdn_gating on the CUDA plugin at the shapes the Qwen3.5-27B boundary test
// (tests/gpu/gdn_gating_gpu_test.cpp: hidden 5120, 48 heads, dense rows) does not reach, aimed
// at the tensor-core variant `mma` (kernels/gated_deltanet/gdn_gating_mma.cu) and run by every
// variant that accepts them plus the planner's choice, float32 and bf16 inputs, against the CPU
// reference plugin (double sums):
//   - hidden sizes that are not multiples of mma's K chunk (32 float32 / 64 bf16 elements) or of
//     a 16-byte vector, and ones so small that some of its 4 K slices are empty;
//   - token counts that are not multiples of its 128-token tile, down to its 64-token minimum;
//   - padded x rows (x_row_stride > hidden) whose padding holds NaN, 16-byte aligned or not
//     (mma's cp.async path and its element-wise path), so a read past a row's end shows;
//   - 1 to 64 heads: odd n8-tile counts, a last tile with columns past 2 * heads, the maximum.
// Outputs are poisoned with NaN before every run, so an unwritten element fails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "gpu_op_env.hpp"
#include "ninfer/abi/ops/gdn_gating.h"
#include "op_routes.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

// Every route sums the hidden-long dot products in float32 (CUDA-core FMAs, or tensor-core
// chunks added in float32), the reference in double. With x ~ N(0, 1) and w ~ N(0, 1/hidden)
// (hidden <= 2056 here) a and b are O(1) and their float32 error is ~1e-6; g scales a's error by
// exp(a_log) < 5 (a_log ~ N(0, 0.5)), beta b's by <= 1/4, expf/log1pf add a few ulps. mma's
// 3xTF32 products are within ~2^-21 of the float32 ones; plain TF32 (2^-11 per product, an
// error of ~sqrt(hidden) * 2^-11 * |x w| ~ 5e-4 in a at hidden 1000) would fail this by an order
// of magnitude. The same bound as the 5120-wide test's `f32-accumulate-5120`.
constexpr Tolerance kGatingSums{"gating-f32-sums-vs-double", 2e-5, 2e-5};

struct Shape {
  int64_t tokens;
  int32_t hidden, heads;
  int64_t x_stride; // elements
  const char* why;
};

const Shape kShapes[] = {
    {64, 1000, 48, 1008, "mma's fewest tokens; hidden 1000 = 31.25 f32 / 15.6 bf16 chunks; aligned padded rows"},
    {200, 997, 5, 1003, "odd hidden and stride: element-wise staging; 10 outputs, one n8 tile per warp"},
    {333, 1000, 33, 1000, "66 outputs: 9 n8 tiles split 5 + 4, the last one with 2 real columns"},
    {129, 256, 64, 260, "64 heads, mma's maximum; 129 tokens: a second tile with one token; rows bf16-unaligned"},
    {100, 40, 3, 41, "hidden of 1-2 chunks: mma's empty K slices contribute zeros"},
    {1500, 2056, 48, 2060, "12 token tiles, the last one partial; several chunks per K slice"},
};

std::string describe(const Shape& s, int32_t dtype) {
  return std::string(dtype == NINFER_DTYPE_F32 ? "f32" : "bf16") + " T=" + std::to_string(s.tokens) +
         " hidden=" + std::to_string(s.hidden) + " heads=" + std::to_string(s.heads) +
         " x_stride=" + std::to_string(s.x_stride) + " (" + s.why + ")";
}

// Host inputs of one call in the op's dtype: float32 values, or their bf16 encodings.
struct HostInputs {
  std::vector<float> x, wa, wb; // F32
  std::vector<uint16_t> xb, wab, wbb; // BF16
  std::vector<float> a_log, dt_bias;
};

// Values rounded to bf16 when the call is bf16, so both backends see the same numbers.
void encode(std::vector<float>& f, std::vector<uint16_t>& b, int32_t dtype) {
  if (dtype != NINFER_DTYPE_BF16) return;
  b.resize(f.size());
  for (size_t i = 0; i < f.size(); ++i) b[i] = std::isnan(f[i]) ? uint16_t{0x7fc0} : to_bf16(f[i]);
}

HostInputs make_inputs(std::mt19937_64& rng, const Shape& s, int32_t dtype) {
  HostInputs in;
  in.x = randn(rng, static_cast<size_t>(s.tokens * s.x_stride));
  for (int64_t t = 0; t < s.tokens; ++t) // row padding: NaN, which no route may read
    for (int64_t k = s.hidden; k < s.x_stride; ++k) in.x[static_cast<size_t>(t * s.x_stride + k)] = std::nanf("");
  in.wa = randn(rng, static_cast<size_t>(s.heads) * s.hidden, 1.f / std::sqrt(static_cast<float>(s.hidden)));
  in.wb = randn(rng, static_cast<size_t>(s.heads) * s.hidden, 2.f / std::sqrt(static_cast<float>(s.hidden)));
  in.a_log = randn(rng, static_cast<size_t>(s.heads), 0.5f);
  in.dt_bias = randn(rng, static_cast<size_t>(s.heads));
  encode(in.x, in.xb, dtype);
  encode(in.wa, in.wab, dtype);
  encode(in.wb, in.wbb, dtype);
  return in;
}

// The buffers of one call on one backend; g and beta start poisoned.
struct GatingCall {
  DeviceBuffer x, wa, wb, a_log, dt_bias, g, beta;
  ninfer_gdn_gating_args args{};
  ninfer_shape shape{};
  size_t outputs = 0;

  GatingCall(Backend& be, const HostInputs& in, const Shape& s, int32_t dtype)
      : x(dtype == NINFER_DTYPE_F32 ? put(be, in.x) : put(be, in.xb)),
        wa(dtype == NINFER_DTYPE_F32 ? put(be, in.wa, "weights") : put(be, in.wab, "weights")),
        wb(dtype == NINFER_DTYPE_F32 ? put(be, in.wb, "weights") : put(be, in.wbb, "weights")),
        a_log(put(be, in.a_log)),
        dt_bias(put(be, in.dt_bias)),
        g(poisoned_buffer(be, static_cast<size_t>(s.tokens * s.heads))),
        beta(poisoned_buffer(be, static_cast<size_t>(s.tokens * s.heads))),
        args{x.data(),         s.x_stride,          wa.data(),  wb.data(), a_log.as<float>(), dt_bias.as<float>(),
             g.as<float>(),    beta.as<float>(),    s.tokens,   s.hidden,  s.heads,           dtype},
        shape{s.tokens, {s.hidden, s.heads, 0, 0}, dtype},
        outputs(static_cast<size_t>(s.tokens * s.heads)) {}

  void poison(Backend& be) {
    const std::vector<float> nan(outputs, std::numeric_limits<float>::quiet_NaN());
    be.upload(g, 0, nan.data(), outputs * sizeof(float));
    be.upload(beta, 0, nan.data(), outputs * sizeof(float));
  }
};

} // namespace

TEST(GdnGatingGpu, EveryVariantMatchesCpuReferenceOnUnalignedShapes) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gdn_gating gpu shapes");
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  for (int32_t dtype : {NINFER_DTYPE_F32, NINFER_DTYPE_BF16}) {
    for (const Shape& s : kShapes) {
      const std::string what = describe(s, dtype);
      const HostInputs in = make_inputs(rng, s, dtype);
      GatingCall ref(*cpu, in, s, dtype);
      cpu->run(NINFER_OP_GDN_GATING, ref.shape, &ref.args);
      const std::vector<double> want_g = widen(get<float>(*cpu, ref.g, ref.outputs));
      const std::vector<double> want_beta = widen(get<float>(*cpu, ref.beta, ref.outputs));

      GatingCall call(*gpu, in, s, dtype);
      std::set<std::string> ran;
      run_variants_then_plan(*gpu, NINFER_OP_GDN_GATING, call.shape, &call.args,
                             [&](const std::string& label, const std::string& variant) {
                               ran.insert(variant);
                               const Mismatch mg = compare(get<float>(*gpu, call.g, call.outputs), want_g, kGatingSums);
                               const Mismatch mb =
                                   compare(get<float>(*gpu, call.beta, call.outputs), want_beta, kGatingSums);
                               EXPECT_TRUE(mg.ok) << what << " " << label << " g: " << mg.describe() << " ("
                                                  << kGatingSums.name << ")";
                               EXPECT_TRUE(mb.ok) << what << " " << label << " beta: " << mb.describe() << " ("
                                                  << kGatingSums.name << ")";
                               call.poison(*gpu);
                             });
      // Every shape here is one mma accepts: it must really have run (not been skipped).
      EXPECT_TRUE(ran.count("mma")) << what << ": the tensor-core variant did not run";
      if (HasFailure()) return;
    }
  }
}
