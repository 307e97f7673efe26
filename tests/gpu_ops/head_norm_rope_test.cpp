// head_norm_rope (per-head q/k RMSNorm + rotary embedding in one launch) on the CUDA plugin:
// every route against the CPU reference plugin on the real models' layouts, and the planner's
// choice against the three unfused CUDA ops it replaces in every attention layer.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gpu_op_env.hpp"
#include "ninfer/abi/ops/head_norm_rope.h"
#include "ninfer/abi/ops/rms_norm.h"
#include "ninfer/abi/ops/rope.h"
#include "op_routes.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

struct Layout {
  int32_t q_heads, k_heads, head_dim, rotary_dim;
  double theta;
  bool gated; // Qwen3.5's q_proj: per head [query | gate], q_head_stride = 2 * head_dim
  int64_t q_head_stride() const { return gated ? 2 * head_dim : head_dim; }
  int64_t k_offset() const { return q_heads * q_head_stride(); }
  // A fused projection row: [q heads (| gates) | k heads | v heads | 3 padding].
  int64_t token_stride() const { return k_offset() + 2 * int64_t{k_heads} * head_dim + 3; }
  bool in_a_row(int64_t col) const { // a q or k head row element (what the op may write)
    if (col < k_offset()) return col % q_head_stride() < head_dim;
    return col < k_offset() + int64_t{k_heads} * head_dim;
  }
  std::string describe() const {
    return std::to_string(q_heads) + "q+" + std::to_string(k_heads) + "k heads x " + std::to_string(head_dim) +
           " rotary " + std::to_string(rotary_dim) + (gated ? " gated" : "");
  }
};

// Qwen3-8B (32 + 8 heads of 128, full rotary), Qwen3.5-27B (24 gated + 4 heads of 256, 25%
// rotary), the largest head row the kernel holds in registers (256 rotated + 256 not), a
// layout with more rows than one CTA has warps and odd widths, and q rows only.
const Layout kLayouts[] = {{32, 8, 128, 128, 1e6, false},  {24, 4, 256, 64, 1e7, true},
                           {2, 1, 512, 256, 1e6, false},   {5, 3, 40, 12, 1e4, true},
                           {3, 0, 96, 32, 10000.0, false}};

const std::vector<int64_t> kTokenCounts{1, 3, 17, 1500};

struct Inputs {
  std::vector<float> buf, wq, wk;
  std::vector<int32_t> pos;
};

Inputs make_inputs(std::mt19937_64& rng, const Layout& l, int64_t T, int32_t offset) {
  Inputs in{randn(rng, static_cast<size_t>(T * l.token_stride()), 2.f), randn(rng, l.head_dim, 0.3f),
            randn(rng, l.head_dim, 0.3f), std::vector<int32_t>(static_cast<size_t>(T))};
  if (!offset)
    for (auto* w : {&in.wq, &in.wk})
      for (auto& v : *w) v += 1.f;
  std::uniform_int_distribution<int32_t> far(0, 262143);
  const int32_t start = far(rng) % (262144 - 1500);
  for (int64_t t = 0; t < T; ++t) in.pos[t] = t % 2 ? far(rng) : start + static_cast<int32_t>(t); // mixed
  return in;
}

// Runs the fused op on `be` by `route`; returns the whole projection buffer after it.
std::vector<float> run_fused(Backend& be, const std::string& route, const Layout& l, int64_t T, const Inputs& in,
                             int32_t offset, float eps) {
  DeviceBuffer xd = put(be, in.buf), qw = put(be, in.wq), kw = put(be, in.wk), pd = put(be, in.pos);
  float* x = xd.as<float>();
  const int64_t ts = l.token_stride();
  // q rows, k rows, weights, positions, counts, norm, rotary.
  ninfer_head_norm_rope_args a{x, ts, l.q_head_stride(), x + l.k_offset(), ts, l.head_dim,
                               qw.as<float>(), kw.as<float>(), pd.as<int32_t>(), T, l.q_heads, l.k_heads,
                               l.head_dim, l.rotary_dim, eps, offset, l.theta};
  const ninfer_shape s{T, {l.head_dim, l.q_heads, l.k_heads, l.rotary_dim}, NINFER_DTYPE_F32};
  run_route(be, NINFER_OP_HEAD_NORM_ROPE, route, s, &a);
  return get<float>(be, xd, in.buf.size());
}

// The fused op and the unfused path differ only in the order of the float32 sum of squares
// (one warp per row vs the norm kernel's teams); cos, sin and every product are the same.
constexpr Tolerance kFusedVsUnfusedGpu{"fused-vs-unfused-gpu", 1e-5, 1e-5};

} // namespace

// Every route on every layout, both norm forms, decode to prompt token counts: the q and k
// rows within the float32 tolerance of the CPU plugin, everything else (gates, v, padding)
// bit for bit as it was.
TEST(HeadNormRopeGpu, EveryRouteMatchesTheCpuReference) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu head_norm_rope");
  const float eps = 1e-6f;
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  for (const Layout& l : kLayouts)
    for (int64_t T : kTokenCounts)
      for (int32_t offset : {0, 1}) {
        const Inputs in = make_inputs(rng, l, T, offset);
        const auto want = run_fused(*cpu, "", l, T, in, offset, eps);
        std::vector<float> want_rows;
        for (size_t i = 0; i < want.size(); ++i)
          if (l.in_a_row(static_cast<int64_t>(i % l.token_stride()))) want_rows.push_back(want[i]);
        const std::string what = l.describe() + " T=" + std::to_string(T) + " offset " + std::to_string(offset);
        for (const std::string& route : op_routes(*gpu, NINFER_OP_HEAD_NORM_ROPE)) {
          const auto got = run_fused(*gpu, route, l, T, in, offset, eps);
          std::vector<float> got_rows;
          size_t changed_outside = 0;
          for (size_t i = 0; i < got.size(); ++i) {
            if (l.in_a_row(static_cast<int64_t>(i % l.token_stride())))
              got_rows.push_back(got[i]);
            else if (std::memcmp(&got[i], &in.buf[i], sizeof(float)) != 0)
              ++changed_outside;
          }
          const Mismatch m = compare(got_rows, widen(want_rows), kGpuVsCpuF32);
          EXPECT_TRUE(m.ok) << what << ", " << route_name(route) << ": " << m.describe();
          EXPECT_EQ(changed_outside, 0u) << what << ", " << route_name(route) << ": wrote outside the q/k rows";
        }
      }
}

// The planner's head_norm_rope against what attention layers ran before it: rms_norm of the q
// heads, rms_norm of the k heads, rope of both (the CUDA plugin's own routes for each).
TEST(HeadNormRopeGpu, AgreesWithTheThreeUnfusedOps) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu head_norm_rope vs unfused");
  const float eps = 1e-6f;
  auto gpu = make_cuda_backend();
  for (const Layout& l : kLayouts)
    for (int64_t T : {int64_t{1}, int64_t{17}})
      for (int32_t offset : {0, 1}) {
        const Inputs in = make_inputs(rng, l, T, offset);
        const auto fused = run_fused(*gpu, "", l, T, in, offset, eps);

        Backend& be = *gpu;
        DeviceBuffer xd = put(be, in.buf), qw = put(be, in.wq), kw = put(be, in.wk), pd = put(be, in.pos);
        float* q = xd.as<float>();
        float* k = q + l.k_offset();
        const int64_t ts = l.token_stride(), qs = l.q_head_stride();
        ninfer_rms_norm_args nq{q, ts, qs, nullptr, 0, 0, qw.as<float>(), q, ts, qs, T, l.q_heads, l.head_dim, eps,
                                offset};
        ninfer_rms_norm_args nk{k, ts, l.head_dim, nullptr, 0, 0, kw.as<float>(), k, ts, l.head_dim, T, l.k_heads,
                                l.head_dim, eps, offset};
        ninfer_rope_args rq{q, ts, qs, pd.as<int32_t>(), T, l.q_heads, l.head_dim, l.rotary_dim, l.theta};
        ninfer_rope_args rk{k, ts, l.head_dim, pd.as<int32_t>(), T, l.k_heads, l.head_dim, l.rotary_dim, l.theta};
        be.run(NINFER_OP_RMS_NORM, {T, {l.head_dim, l.q_heads, 0, 0}, NINFER_DTYPE_F32}, &nq);
        if (l.k_heads) be.run(NINFER_OP_RMS_NORM, {T, {l.head_dim, l.k_heads, 0, 0}, NINFER_DTYPE_F32}, &nk);
        be.run(NINFER_OP_ROPE, {T, {l.head_dim, l.q_heads, l.rotary_dim, 0}, NINFER_DTYPE_F32}, &rq);
        if (l.k_heads) be.run(NINFER_OP_ROPE, {T, {l.head_dim, l.k_heads, l.rotary_dim, 0}, NINFER_DTYPE_F32}, &rk);
        const auto unfused = get<float>(be, xd, in.buf.size());

        const Mismatch m = compare(fused, widen(unfused), kFusedVsUnfusedGpu);
        EXPECT_TRUE(m.ok) << l.describe() << " T=" << T << " offset " << offset << ": " << m.describe();
      }
}
