// linear on quantized weights (INT4, INT8, FP8_E4M3 in the canonical layout,
// ninfer/abi/ops/quant_weight.h) on the CUDA plugin: the planner's choice and every variant that
// takes the dtype (gemv_quant_warp_t*, linear/linear_gemv_quant.cu; gemv_quant_mma,
// linear/linear_gemv_quant_mma.cu, gemv_quant_mma_split; gemv_int4_lean,
// linear/linear_gemv_int4_lean.cu: int4, 1-16 tokens a launch, 33 as launches of 16 and 1; each
// where its shape rules admit the case)
// forced, against the CPU
// plugin's linear on the same fresh random data: every code dtype x scale dtype (f32, bf16,
// f16) x zero points or symmetric x g_idx or k / group_size x T = 1..9, 12, 16, 17, 33
// x accumulate, outputs poisoned with NaN (accumulate: random y, NaN padding). Shapes reach each
// kernel path: 16-byte code loads with one group per load, 4-byte loads (rows not whole 16-byte
// vectors), per-code groups (g_idx, a group size that splits a load), one group per row, x rows
// off 16-byte alignment, odd N. gemv_quant_mma's kernels are reached through the same cases: its
// token forms by T (1, 2, 3-4: column pairs; 5 on: the split form in tiles of 8) and its
// x loads by the shapes whose x rows are or are not 16-byte aligned. gemv_int4_lean's 36 kernels
// by token tiles (1-4, 5-8, 9-16) x scale dtype x zeros x group form (groups of 128: one step
// each; 256, 384, 512 = K: several steps per group), its K chunks by the 5,120-column shapes (5 chunks meeting through the merge
// tickets, one and three row blocks) and the 3,072-column one (3 chunks, the second starting
// inside a group), its staging of x by aligned and unaligned rows, its row blocks by N past 128
// and not a multiple of 16. norm_linear on quantized weights takes its unfused form
// (rms_norm + this linear) and is checked against the CPU plugin's norm_linear too.
//
// Tolerance `float32-summation-order`: both plugins dequantize exactly (the contract's weight is
// exact in float32 for f16 / bf16 scales, one rounding for f32, the same rounding on both) and
// accumulate in float32, in different orders (the CPU plugin's blocked row sums, the GPU's 32
// strided lane sums and a shuffle tree). Each order's error is a sum of K roundings of partial
// sums, |e| <= K u sum_k |x_k w_nk| in the worst case and about sqrt(K) u sum_k |x_k w_nk| for
// independent roundings (u = 2^-24). The bound is 8 sqrt(K) u sum_k |x_k w_nk| (+ u |y| for
// the accumulate add): the difference of two such errors with room to spare, and still ~1e-5 of
// the terms' size at K = 5120, far below any dequantization mistake (one wrong code or scale
// moves an output by ~|x| |scale|).
//
// Tolerance `bf16-hi-lo-x`: gemv_quant_mma multiplies x split into bf16 hi + lo, which leaves
// at most 2^-18 |x| of each x out; 2^-17 sum_k |x_k w_nk| is added to the bound above.
//
// Tolerance `bf16-x-and-w` (cublaslt_dequant, the prompt variant): x and the dequantized weight
// are each rounded to bf16 (2^-9 relative), so a product is off by at most ~2^-8 of itself;
// 2^-7 sum_k |x_k w_nk| bounds it with room, still far below a wrong code or scale.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu_op_env.hpp"
#include "ninfer/abi/ops/linear.h"
#include "ninfer/abi/ops/norm_linear.h"
#include "ninfer/runtime/unfused_forms.hpp"
#include "ninfer/support/error.hpp"
#include "op_routes.hpp"
#include "quant_weight_case.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

constexpr const char* kSummationOrder = "float32-summation-order";
constexpr double kSummationOrderFactor = 8.0; // x sqrt(K) u sum |x w|, see the file comment
constexpr const char* kHiLoX = "bf16-hi-lo-x";
constexpr double kHiLoXFactor = 0x1.0p-17; // x sum |x w|, see the file comment
constexpr const char* kBf16XW = "bf16-x-and-w";
constexpr double kBf16XWFactor = 0x1.0p-7; // x sum |x w|, see the file comment
constexpr const char* kBf16Variant = "cublaslt_dequant";

// A quantized matrix on one backend, and the host description pointing at it; `tiled`: its codes
// in NINFER_QUANT_LAYOUT_TILES16 (QuantWeightCase::tiled_codes).
struct QuantOnBackend {
  DeviceBuffer codes, scales, zeros, g_idx;
  ninfer_quant_weight wq{};

  QuantOnBackend(Backend& be, const QuantWeightCase& c, bool tiled = false)
      : codes(put(be, tiled ? c.tiled_codes() : c.codes, "weights")),
        scales(put(be, c.scales, "scales")),
        zeros(c.zeros.empty() ? DeviceBuffer{} : put(be, c.zeros, "zeros")),
        g_idx(c.g_idx.empty() ? DeviceBuffer{} : put(be, c.g_idx, "g_idx")) {
    wq = {scales.data(), c.zeros.empty() ? nullptr : zeros.as<uint8_t>(),
          c.g_idx.empty() ? nullptr : g_idx.as<int32_t>(), c.scale_dtype, c.group,
          tiled ? NINFER_QUANT_LAYOUT_TILES16 : NINFER_QUANT_LAYOUT_ROWS};
  }
};

// sum_k |x[t, k] w[n, k]| for every (t, n): the scale of the summation-order error.
std::vector<double> abs_terms(const QuantWeightCase& c, const std::vector<float>& x, int64_t xs, int64_t T) {
  const std::vector<double> w = c.dequantized();
  std::vector<double> s(static_cast<size_t>(T * c.N), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int32_t n = 0; n < c.N; ++n) {
      double acc = 0;
      for (int32_t k = 0; k < c.K; ++k)
        acc += std::fabs(double(x[static_cast<size_t>(t * xs + k)]) * w[static_cast<size_t>(n) * c.K + k]);
      s[static_cast<size_t>(t * c.N + n)] = acc;
    }
  return s;
}

// got (T rows of N, stride ys) against the CPU plugin's `want` (same layout).
// bf16: the variant rounds x and w to bf16 (`bf16-x-and-w`).
std::string check(const std::vector<float>& got, const std::vector<float>& want, const std::vector<double>& terms,
                  int64_t T, int32_t N, int32_t K, int64_t ys, bool bf16) {
  const double u = std::ldexp(1.0, -24);
  int bad = 0;
  std::string first;
  for (int64_t t = 0; t < T; ++t) {
    for (int32_t n = 0; n < N; ++n) {
      const size_t i = static_cast<size_t>(t * ys + n);
      const double terms_tn = terms[static_cast<size_t>(t * N + n)];
      const double bound =
          (kSummationOrderFactor * std::sqrt(double(K)) * u + (bf16 ? kBf16XWFactor : kHiLoXFactor)) * terms_tn +
          u * std::fabs(want[i]);
      if (std::isfinite(got[i]) && std::fabs(double(got[i]) - want[i]) <= bound) continue;
      if (bad++ == 0)
        first = "y[" + std::to_string(t) + ", " + std::to_string(n) + "] = " + std::to_string(got[i]) + ", CPU " +
                std::to_string(want[i]) + " (bound " + std::to_string(bound) + ")";
    }
    for (int64_t n = N; n < ys; ++n)
      if (!std::isnan(got[static_cast<size_t>(t * ys + n)])) return "wrote past row " + std::to_string(t);
  }
  return bad ? std::to_string(bad) + " outside " + kSummationOrder + " + " + (bf16 ? kBf16XW : kHiLoX) + ", first " +
                   first
             : "";
}

struct Shape {
  int32_t K, N, group;
  int64_t x_pad;
  const char* path; // what it reaches
};
// int4 rows: K / 2 bytes, int8 / fp8: K bytes; a 16-byte load holds 32 int4 or 16 int8 codes.
const Shape kShapes[] = {
    {256, 67, 64, 0, "16-byte loads, one group per load"},
    {5120, 40, 128, 0, "a Qwen3.5-27B row, group 128"},
    {200, 33, 8, 4, "4-byte loads (rows not whole 16-byte vectors)"},
    {96, 19, 12, 0, "a group that splits a load: per-code groups"},
    {160, 9, 160, 1, "one group per row, x rows off 16-byte alignment"},
    {384, 131, 128, 1, "tensor cores: 3 int4 / 6 int8 steps, x off 16-byte alignment, N past a CTA"},
    {512, 70, 512, 0, "tensor cores: one group per row over several steps"},
    {1024, 24, 256, 0, "tensor cores: groups of two int4 / four int8 steps"},
    {5120, 300, 128, 0, "int4 lean: K in 5 chunks over 3 row blocks (merge tickets)"},
    {3072, 136, 384, 1, "int4 lean: K in 3 chunks, one starting inside a group of 3 steps; x off alignment"},
};

// y = x . W^T of T rows of x (stride K) on `route` forced (empty: the planner's), against the CPU
// plugin's on the same data (outputs NaN-poisoned, no accumulate), over the first `rows` rows
// (0: all): check()'s verdict, empty when every output is in bounds.
std::string route_against_cpu(Backend& cpu, Backend& gpu, const QuantWeightCase& c, const QuantOnBackend& wc,
                              const QuantOnBackend& wg, const std::vector<float>& x, int64_t T,
                              const std::string& route, int32_t rows = 0) {
  const int32_t K = c.K, N = rows ? rows : c.N;
  const int64_t ys = N + 2;
  const std::vector<double> terms = abs_terms(c, x, K, T);
  const std::vector<float> poison(static_cast<size_t>(T * ys), NAN);
  const DeviceBuffer xc = put(cpu, x), xg = put(gpu, x);
  DeviceBuffer yc = put(cpu, poison), yg = put(gpu, poison);
  const ninfer_shape s{T, {K, N, ninfer_quant_planning_group(&wg.wq), ninfer_quant_planning_layout(&wg.wq)}, c.dtype};
  if (!route.empty()) {
    const ninfer_variant* v = gpu.plugin().find_variant(NINFER_OP_LINEAR, route);
    if (!v || !v->supports(v->ctx, &s)) return route + " does not take K=" + std::to_string(K) + " T=" + std::to_string(T);
  }
  ninfer_linear_args ac{xc.as<float>(), K, wc.codes.data(), yc.as<float>(), ys, T, K, N, c.dtype, 0, &wc.wq};
  cpu.run(NINFER_OP_LINEAR, s, &ac);
  const auto want = get<float>(cpu, yc, poison.size());
  ninfer_linear_args ag{xg.as<float>(), K, wg.codes.data(), yg.as<float>(), ys, T, K, N, c.dtype, 0, &wg.wq};
  gpu.reserve_workspace(NINFER_OP_LINEAR, s);
  run_route(gpu, NINFER_OP_LINEAR, route, s, &ag);
  const std::string used = route.empty() ? gpu.plan(NINFER_OP_LINEAR, s).variant : route;
  std::vector<double> terms_n; // the first N rows' terms
  for (int64_t t = 0; t < T; ++t)
    for (int32_t n = 0; n < N; ++n) terms_n.push_back(terms[static_cast<size_t>(t * c.N + n)]);
  return check(get<float>(gpu, yg, poison.size()), want, terms_n, T, N, K, ys, used == kBf16Variant);
}

} // namespace

TEST(QuantLinearGpu, EveryLayoutAndTokenCountMatchesCpu) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu quantized linear");
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  const auto routes = op_routes(*gpu, NINFER_OP_LINEAR);
  const std::vector<int64_t> tokens{1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 33};
  const int64_t Tmax = tokens.back();
  int runs = 0;
  for (int32_t dtype : {NINFER_DTYPE_INT4, NINFER_DTYPE_INT8, NINFER_DTYPE_FP8_E4M3})
    for (int32_t sd : {NINFER_DTYPE_F32, NINFER_DTYPE_BF16, NINFER_DTYPE_F16})
      for (bool zeros : {false, true})
        for (bool g_idx : {false, true})
          for (const Shape& sh : kShapes) {
            if (dtype == NINFER_DTYPE_FP8_E4M3 && zeros) continue; // fp8 has no zero points
            const QuantWeightCase c = QuantWeightCase::random(rng, dtype, sh.N, sh.K, sh.group, sd, zeros, g_idx);
            const int64_t xs = sh.K + sh.x_pad, ys = sh.N + 2;
            const auto x = randn(rng, static_cast<size_t>(Tmax * xs));
            const std::vector<double> terms = abs_terms(c, x, xs, Tmax);
            auto y0 = randn(rng, static_cast<size_t>(Tmax * ys));
            for (int64_t t = 0; t < Tmax; ++t)
              for (int64_t n = sh.N; n < ys; ++n) y0[static_cast<size_t>(t * ys + n)] = NAN; // padding stays NaN
            const std::vector<float> poison(y0.size(), NAN);
            QuantOnBackend wc(*cpu, c), wg(*gpu, c);
            const DeviceBuffer xc = put(*cpu, x), xg = put(*gpu, x);
            DeviceBuffer yc = put(*cpu, poison), yg = put(*gpu, poison);
            for (int32_t accumulate : {0, 1})
              for (int64_t T : tokens) {
                const std::vector<float>& before = accumulate ? y0 : poison;
                const ninfer_shape s{T, {sh.K, sh.N, ninfer_quant_planning_group(&wg.wq), 0}, dtype};
                cpu->upload(yc, 0, before.data(), before.size() * sizeof(float));
                ninfer_linear_args ac{xc.as<float>(), xs, wc.codes.data(), yc.as<float>(), ys, T, sh.K, sh.N,
                                      dtype, accumulate, &wc.wq};
                cpu->run(NINFER_OP_LINEAR, s, &ac);
                const auto want = get<float>(*cpu, yc, before.size());
                ninfer_linear_args ag{xg.as<float>(), xs, wg.codes.data(), yg.as<float>(), ys, T, sh.K, sh.N,
                                      dtype, accumulate, &wg.wq};
                for (const std::string& route : routes) {
                  if (!route.empty()) {
                    const ninfer_variant* v = gpu->plugin().find_variant(NINFER_OP_LINEAR, route);
                    if (!v || !(v->dtype_mask & (1u << dtype)) || (v->supports && !v->supports(v->ctx, &s))) continue;
                  }
                  gpu->upload(yg, 0, before.data(), before.size() * sizeof(float));
                  gpu->reserve_workspace(NINFER_OP_LINEAR, s); // the planner's route may be cublaslt_dequant
                  run_route(*gpu, NINFER_OP_LINEAR, route, s, &ag);
                  const auto got = get<float>(*gpu, yg, before.size());
                  const std::string used = route.empty() ? gpu->plan(NINFER_OP_LINEAR, s).variant : route;
                  const std::string why = check(got, want, terms, T, sh.N, sh.K, ys, used == kBf16Variant);
                  EXPECT_TRUE(why.empty()) << c.describe() << " (" << sh.path << ") T=" << T << " accumulate "
                                           << accumulate << ", " << route_name(route) << " (" << used << "): " << why;
                  ++runs;
                }
              }
          }
  EXPECT_GT(runs, 0);
}

// gemv_int4_lean and gemv_fp8_lean at 3 and 4 tokens where N alone gives enough CTAs (193 row
// blocks): K in one chunk where x fits shared memory (4,096 wide at 4 tokens: 32 steps) and cut
// for it (5,120 wide: two chunks meeting through 193 merge tickets). Against the CPU plugin, as
// above, with and without zero points (int4), groups of one and two steps.
TEST(QuantLinearGpu, LeanAtFourTokensOverManyRowBlocks) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu lean many row blocks");
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  const int32_t N = 193 * 128 - 5; // the last row block partial
  int runs = 0;
  for (int32_t dtype : {NINFER_DTYPE_INT4, NINFER_DTYPE_FP8_E4M3})
    for (int32_t K : {4096, 5120})
      for (auto [zeros, group] : {std::pair{false, 128}, std::pair{true, 256}}) {
        const std::string route = dtype == NINFER_DTYPE_INT4 ? "gemv_int4_lean" : "gemv_fp8_lean";
        const QuantWeightCase c =
            QuantWeightCase::random(rng, dtype, N, K, group, NINFER_DTYPE_BF16, zeros && dtype == NINFER_DTYPE_INT4, false);
        const QuantOnBackend wc(*cpu, c), wg(*gpu, c);
        const auto x = randn(rng, static_cast<size_t>(4 * K));
        for (int64_t t : {4, 3}) {
          const std::string why = route_against_cpu(*cpu, *gpu, c, wc, wg, x, t, route);
          EXPECT_TRUE(why.empty()) << c.describe() << " T=" << t << ": " << why;
          ++runs;
        }
      }
  EXPECT_EQ(runs, 16);
}

// Codes in tiles (NINFER_QUANT_LAYOUT_TILES16, the loader's choice where the decode route is a
// lean GEMV): gemv_int4_lean and gemv_fp8_lean (every token tile, K in chunks and not, groups of
// one and several steps, zeros and not, every scale dtype), cublaslt_dequant and the planner's
// route, against the CPU plugin on the same tiled bytes (which the CPU tests check against the
// float64 contract), over the whole matrix and over its first rows (a band cut short: the
// drafter's rows of an LM head). Variants that read row-major codes only must refuse the shape.
TEST(QuantLinearGpu, CodesInTilesMatchCpu) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu quantized linear, codes in tiles");
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  const Shape shapes[] = {{5120, 304, 128, 0, "K in chunks over 3 row blocks"},
                          {3072, 144, 384, 0, "groups of 3 steps, K in chunks"},
                          {256, 48, 256, 0, "one group per row, 3 bands"}};
  int runs = 0;
  for (int32_t dtype : {NINFER_DTYPE_INT4, NINFER_DTYPE_FP8_E4M3})
    for (int32_t sd : {NINFER_DTYPE_F32, NINFER_DTYPE_BF16, NINFER_DTYPE_F16})
      for (bool zeros : {false, true})
        for (const Shape& sh : shapes) {
          if (dtype == NINFER_DTYPE_FP8_E4M3 && zeros) continue;
          const QuantWeightCase c = QuantWeightCase::random(rng, dtype, sh.N, sh.K, sh.group, sd, zeros, false);
          const QuantOnBackend wc(*cpu, c, true), wg(*gpu, c, true);
          const auto x = randn(rng, static_cast<size_t>(33 * sh.K));
          const std::string lean = dtype == NINFER_DTYPE_INT4 ? "gemv_int4_lean" : "gemv_fp8_lean";
          for (int64_t T : {1, 4, 5, 9, 33})
            for (const std::string& route : {lean, std::string(kBf16Variant), std::string()})
              for (int32_t rows : {sh.N, sh.N - 5}) {
                const std::string why = route_against_cpu(*cpu, *gpu, c, wc, wg, x, T, route, rows);
                EXPECT_TRUE(why.empty()) << c.describe() << " tiles (" << sh.path << ") T=" << T << " rows " << rows
                                         << ", " << route_name(route) << ": " << why;
                ++runs;
              }
          const ninfer_shape s{1, {sh.K, sh.N, sh.group, NINFER_QUANT_LAYOUT_TILES16}, dtype};
          for (const char* rows_only : {"gemv_quant_mma", "gemv_quant_mma_split", "gemv_quant_warp_t1"}) {
            const ninfer_variant* v = gpu->plugin().find_variant(NINFER_OP_LINEAR, rows_only);
            ASSERT_NE(v, nullptr) << rows_only;
            EXPECT_FALSE(v->supports(v->ctx, &s)) << rows_only << " took codes in tiles";
          }
        }
  EXPECT_EQ(runs, (18 + 9) * 5 * 3 * 2); // int4: 3 scale dtypes x zeros or not x 3 shapes; fp8 without zeros
}

// gemv_fp8_lean splits x into f16 halves after a power-of-two scale per token: rows far past
// f16's range (1e6), far below it (1e-6), and one spike of 1e5 among ordinary values (a Qwen
// activation outlier) all match the CPU plugin within the same bound, at 1, 5 and 12 tokens (each
// tile count), K cut into chunks (each CTA its own scale) and not.
TEST(QuantLinearGpu, Fp8LeanTakesXOfAnyRange) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu fp8 lean x range");
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  int runs = 0;
  for (auto [K, N] : {std::pair{1024, 300}, std::pair{5120, 40}}) {
    const QuantWeightCase c = QuantWeightCase::random(rng, NINFER_DTYPE_FP8_E4M3, N, K, 128, NINFER_DTYPE_BF16, false, false);
    const QuantOnBackend wc(*cpu, c), wg(*gpu, c);
    for (int64_t T : {1, 5, 12})
      for (double scale : {1e6, 1e-6, 0.0}) { // 0: ordinary values with one spike per row
        auto x = randn(rng, static_cast<size_t>(T * K));
        for (int64_t t = 0; t < T; ++t) {
          if (scale > 0)
            for (int32_t k = 0; k < K; ++k) x[static_cast<size_t>(t * K + k)] *= static_cast<float>(scale);
          else
            x[static_cast<size_t>(t * K + (t * 37) % K)] = 1e5f;
        }
        const std::string why = route_against_cpu(*cpu, *gpu, c, wc, wg, x, T, "gemv_fp8_lean");
        EXPECT_TRUE(why.empty()) << "K=" << K << " T=" << T << " x scale " << scale << ": " << why;
        ++runs;
      }
  }
  EXPECT_EQ(runs, 18);
}

// A shape no quantized variant takes (int4 rows that are not whole 4-byte words) is a planning
// error naming the op, the dtype and the plugin, never a wrong result.
TEST(QuantLinearGpu, RowsOfPartialWordsAreRefusedClearly) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto gpu = make_cuda_backend();
  for (auto [dtype, K] : {std::pair{NINFER_DTYPE_INT4, 100}, std::pair{NINFER_DTYPE_INT8, 102}}) {
    try {
      const Plan p = gpu->plan(NINFER_OP_LINEAR, {1, {K, 64, 0, 0}, dtype});
      ADD_FAILURE() << ninfer_dtype_name(dtype) << " K=" << K << " routed to " << p.variant;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("linear"), std::string::npos) << msg;
      EXPECT_NE(msg.find(ninfer_dtype_name(dtype)), std::string::npos) << msg;
      EXPECT_NE(msg.find(gpu->plugin().name()), std::string::npos) << msg;
    }
  }
}

// norm_linear on quantized weights: no CUDA variant takes them, so the planner runs its unfused
// form (rms_norm, then linear on a quantized variant, then silu_mul when gated), which must match
// the CPU plugin's norm_linear. Bound: `float32-summation-order` + `bf16-hi-lo-x` of each product p = xn . w_n
// (xn the normed row, computed here in float64), carried through silu(a) * b as
// |silu'(a)| |b| e_a + |silu(a)| e_b (|silu'| <= 1.1), plus the normed row's own float32
// rounding (a few u of each term, inside the same bound's room).
TEST(QuantLinearGpu, NormLinearRunsUnfusedAndMatchesCpu) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu quantized norm_linear");
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  const int32_t K = 512, N = 96, group = 64;
  const float eps = 1e-6f;
  const double u = std::ldexp(1.0, -24);
  for (int32_t dtype : {NINFER_DTYPE_INT4, NINFER_DTYPE_INT8, NINFER_DTYPE_FP8_E4M3})
    for (int32_t gated : {0, 1})
      for (int64_t T : {1, 3, 8}) {
        const ninfer_shape s{T, {K, N, gated, 0}, dtype};
        ASSERT_TRUE(gpu->plan(NINFER_OP_NORM_LINEAR, s).unfused) << ninfer_dtype_name(dtype);
        const QuantWeightCase c =
            QuantWeightCase::random(rng, dtype, N, K, group, NINFER_DTYPE_BF16, dtype == NINFER_DTYPE_INT4, false);
        const auto x = randn(rng, static_cast<size_t>(T * K));
        const auto norm_w = randn(rng, K, 0.2f);
        const int32_t out = gated ? N / 2 : N;
        const std::vector<float> poison(static_cast<size_t>(T * out), NAN);
        std::vector<std::vector<float>> ys;
        for (Backend* be : {cpu.get(), gpu.get()}) {
          QuantOnBackend w(*be, c);
          const DeviceBuffer xb = put(*be, x), nb = put(*be, norm_w);
          DeviceBuffer yb = put(*be, poison);
          // The unfused form's scratch rows: the normed input and (gated) the projection.
          DeviceBuffer normed = put(*be, std::vector<float>(static_cast<size_t>(T * K), NAN), "normed");
          DeviceBuffer proj = put(*be, std::vector<float>(static_cast<size_t>(T * N), NAN), "projection");
          const NormLinearUnfused scratch{normed.as<float>(), K, proj.as<float>(), N};
          ninfer_norm_linear_args a{xb.as<float>(), K,       nb.as<float>(), eps, 1, w.codes.data(), dtype,
                                    yb.as<float>(), out,     nullptr,        0,   T, K,              N,
                                    gated,          &w.wq};
          be->reserve_workspace(NINFER_OP_NORM_LINEAR, s);
          be->run(NINFER_OP_NORM_LINEAR, s, &a, &scratch);
          ys.push_back(get<float>(*be, yb, poison.size()));
        }
        // Each output's bound, from the products in float64 (see the comment above).
        const std::vector<double> wd = c.dequantized();
        std::vector<double> bound(static_cast<size_t>(T * out));
        for (int64_t t = 0; t < T; ++t) {
          double ss = 0;
          for (int32_t k = 0; k < K; ++k) ss += double(x[static_cast<size_t>(t * K + k)]) * x[static_cast<size_t>(t * K + k)];
          const double r = 1.0 / std::sqrt(ss / K + eps);
          std::vector<double> p(static_cast<size_t>(N)), e(static_cast<size_t>(N));
          for (int32_t n = 0; n < N; ++n) {
            double acc = 0, abs_acc = 0;
            for (int32_t k = 0; k < K; ++k) {
              const double xn = x[static_cast<size_t>(t * K + k)] * r * (1.0 + norm_w[static_cast<size_t>(k)]);
              acc += xn * wd[static_cast<size_t>(n) * K + k];
              abs_acc += std::fabs(xn * wd[static_cast<size_t>(n) * K + k]);
            }
            p[static_cast<size_t>(n)] = acc;
            e[static_cast<size_t>(n)] = (kSummationOrderFactor * std::sqrt(double(K)) * u + kHiLoXFactor) * abs_acc;
          }
          for (int32_t n = 0; n < out; ++n) {
            double b = e[static_cast<size_t>(n)];
            if (gated) {
              const double a = p[static_cast<size_t>(n)], up = p[static_cast<size_t>(n + out)];
              const double silu = a / (1.0 + std::exp(-a));
              b = 1.1 * std::fabs(up) * e[static_cast<size_t>(n)] + std::fabs(silu) * e[static_cast<size_t>(n + out)] +
                  4 * u * std::fabs(silu * up);
            }
            bound[static_cast<size_t>(t * out + n)] = b;
          }
        }
        const std::vector<float>& want = ys[0];
        const std::vector<float>& got = ys[1];
        int bad = 0;
        std::string first;
        for (size_t i = 0; i < got.size(); ++i) {
          if (std::isfinite(got[i]) && std::fabs(double(got[i]) - want[i]) <= bound[i]) continue;
          if (bad++ == 0)
            first = "y[" + std::to_string(i) + "] = " + std::to_string(got[i]) + ", CPU " + std::to_string(want[i]) +
                    " (bound " + std::to_string(bound[i]) + ")";
        }
        EXPECT_EQ(bad, 0) << c.describe() << " gated " << gated << " T=" << T << ": " << bad << " outside "
                          << kSummationOrder << " + " << kHiLoX << ", first " << first;
      }
}
