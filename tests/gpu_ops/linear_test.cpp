// linear on the CUDA plugin: every variant (GEMV-style for decode, bf16 ones on the tensor
// cores; tiled and cuBLASLt for prefill) and the planner's choice, float32 and bfloat16 weights.
//   - tile edges: token counts on both sides of every tile size and shapes that are not
//     multiples of any tile, against the CPU reference plugin, poisoned outputs, strided rows;
//   - bucket boundaries: T = 1, every linear bucket edge of the built-in schedule table +-1 and a
//     T beyond cuBLASLt's 4096-row chunk, against a float64 oracle;
//   - model shapes (Qwen3-8B / Qwen3.5-27B projections) against the CPU reference.
// Timing lives in linear_bench (same folder), never in a test.
//
// Tolerances: every route keeps x in float32 except `cublaslt` with bf16 weights, which rounds x
// to bf16 before the tensor-core product. That rounding is the one error term that matters:
// x~ = x (1 + d), |d| <= u = 2^-8 (bf16 keeps 8 significant bits), so
// y~_n - y_n = sum_k x_k d_k w_nk, and over many outputs with independent d_k the relative L2
// error is rms(d) <= u (about 0.42 u for normally distributed x); float32 accumulation adds
// ~1e-6. Named `bf16-activation-rounding`: relative L2 <= 2^-8 over the whole output, every
// element finite. All other routes: `gpu-f32-vs-cpu-reference` per element.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_op_env.hpp"
#include "ninfer/abi/ops/linear.h"
#include "ninfer/planning/schedule_table.hpp"
#include "op_routes.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

struct Weights {
  std::vector<float> f32;       // the values the op sees (bf16-rounded for BF16)
  std::vector<uint16_t> bf16;   // their bf16 encoding
};

// Uniform values of standard deviation `scale`, from a splitmix64 stream seeded by `rng`: the
// model-sized weights are 10^8..10^9 elements, too many for std::normal_distribution in a test.
std::vector<float> fast_random(std::mt19937_64& rng, size_t n, float scale) {
  uint64_t state = rng();
  const float half_width = scale * std::sqrt(3.f);
  std::vector<float> v(n);
  for (auto& x : v) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    x = half_width * (static_cast<float>(z >> 40) * 0x1p-23f - 1.f); // 24 random bits -> [-1, 1)
  }
  return v;
}

Weights random_weights(std::mt19937_64& rng, int32_t dtype, int32_t K, int32_t N) {
  Weights w{fast_random(rng, static_cast<size_t>(N) * K, 1.f / std::sqrt(static_cast<float>(K))), {}};
  w.bf16.resize(w.f32.size());
  for (size_t i = 0; i < w.f32.size(); ++i) {
    w.bf16[i] = to_bf16(w.f32[i]);
    if (dtype == NINFER_DTYPE_BF16) w.f32[i] = from_bf16(w.bf16[i]);
  }
  return w;
}

// The weights, x and y of one linear call living on one backend.
struct LinearCall {
  DeviceBuffer x, w, y;
  ninfer_linear_args args{};
  ninfer_shape shape{};
  int64_t y_elems = 0;

  LinearCall(Backend& be, const std::vector<float>& xh, int64_t x_stride, const Weights& wh, int32_t dtype, int64_t T,
             int32_t K, int32_t N, int64_t y_stride)
      : x(put(be, xh)),
        w(dtype == NINFER_DTYPE_F32 ? put(be, wh.f32, "weights") : put(be, wh.bf16, "weights")),
        y(poisoned_buffer(be, static_cast<size_t>(T * y_stride))),
        args{x.as<float>(), x_stride, w.data(), y.as<float>(), y_stride, T, K, N, dtype, /*accumulate=*/0},
        shape{T, {K, N, 0, 0}, dtype},
        y_elems(T * y_stride) {}

  void poison(Backend& be) {
    be.upload(y, 0, std::vector<float>(static_cast<size_t>(y_elems), std::nanf("")).data(), y_elems * sizeof(float));
  }
};

std::string describe(int32_t dtype, int64_t T, int32_t K, int32_t N) {
  return std::string(dtype == NINFER_DTYPE_F32 ? "f32" : "bf16") + " weights, T=" + std::to_string(T) + " K=" +
         std::to_string(K) + " N=" + std::to_string(N);
}

// See the file comment: cuBLASLt with x rounded to bf16, relative L2 over the output.
constexpr const char* kBf16ActivationRounding = "bf16-activation-rounding";
constexpr double kBf16ActivationRelL2 = 0x1p-8;

// The variant a route runs for a shape ("" = the planner's choice), or "" when the forced
// variant does not support the shape (the caller skips it).
std::string variant_for(Backend& be, const std::string& route, const ninfer_shape& s) {
  if (route.empty()) return be.plan(NINFER_OP_LINEAR, s).variant;
  const ninfer_variant* v = be.plugin().find_variant(NINFER_OP_LINEAR, route);
  return v && (v->dtype_mask & (1u << s.dtype)) && (!v->supports || v->supports(v->ctx, &s)) ? route : "";
}

bool rounds_x_to_bf16(const std::string& variant, int32_t dtype) {
  return variant == "cublaslt" && dtype == NINFER_DTYPE_BF16;
}

// Checks a route's output against `want` (float64 oracle, or the CPU plugin's float32 result,
// itself within ~1e-6 of one) with the tolerance the route's arithmetic earns.
Mismatch check_route(const std::string& variant, int32_t dtype, const std::vector<float>& got,
                     const std::vector<double>& want) {
  if (!rounds_x_to_bf16(variant, dtype)) return compare(got, want, kGpuVsCpuF32);
  return compare_rel_l2(got, want, kBf16ActivationRelL2);
}

std::string describe_check(const std::string& variant, int32_t dtype, const Mismatch& m) {
  if (!rounds_x_to_bf16(variant, dtype)) return m.describe() + " (" + kGpuVsCpuF32.name + ")";
  return std::string(kBf16ActivationRounding) + ": relative L2 / first non-finite value " + std::to_string(m.got) +
         " (bound " + std::to_string(kBf16ActivationRelL2) + "), " + std::to_string(m.count) + " failures";
}

} // namespace

// K: multiples of 8 (16-byte weight rows) and not (scalar path), shorter than one warp step
// and longer than a k-tile, and a long row of whole 16-byte vectors; N: odd, below one GEMV row
// block, not a multiple of any tile.
// T: 1..8 are the GEMV tiles, 16/17 and 64 straddle fma_tile64, 255 and 1000 fma_tile128.
TEST(LinearGpu, EveryVariantMatchesCpuAcrossTileEdges) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu linear tile edges");
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  const auto routes = op_routes(*gpu, NINFER_OP_LINEAR);
  struct Shape {
    int32_t K, N;
    int64_t x_pad; // x row stride = K + x_pad
  };
  for (int32_t dtype : {NINFER_DTYPE_F32, NINFER_DTYPE_BF16})
    for (Shape sh : {Shape{300, 257, 3}, Shape{256, 130, 0}, Shape{7, 3, 1}, Shape{1000, 515, 0}, Shape{129, 1, 2},
                     Shape{2048, 333, 4}})
      for (int64_t T : {1, 2, 3, 7, 16, 17, 64, 255, 1000}) {
        const int64_t xs = sh.K + sh.x_pad, ys = sh.N + 2;
        const auto x = randn(rng, static_cast<size_t>(T * xs));
        const Weights w = random_weights(rng, dtype, sh.K, sh.N);
        LinearCall ref(*cpu, x, xs, w, dtype, T, sh.K, sh.N, ys);
        cpu->run(NINFER_OP_LINEAR, ref.shape, &ref.args);
        const auto want = row_elements(get<float>(*cpu, ref.y, ref.y_elems), T, sh.N, ys);
        LinearCall call(*gpu, x, xs, w, dtype, T, sh.K, sh.N, ys);
        for (const std::string& route : routes) {
          const std::string variant = variant_for(*gpu, route, call.shape);
          if (variant.empty()) continue; // e.g. cublaslt needs 16-byte rows
          call.poison(*gpu);
          if (route.empty()) gpu->reserve_workspace(NINFER_OP_LINEAR, call.shape); // as a model does at load
          run_route(*gpu, NINFER_OP_LINEAR, route, call.shape, &call.args);
          const auto y = get<float>(*gpu, call.y, call.y_elems);
          const Mismatch m = check_route(variant, dtype, row_elements(y, T, sh.N, ys), widen(want));
          EXPECT_TRUE(m.ok) << describe(dtype, T, sh.K, sh.N) << ", " << route_name(route) << " (" << variant
                            << "): " << describe_check(variant, dtype, m);
          EXPECT_TRUE(padding_still_poisoned(y, T, sh.N, ys))
              << describe(dtype, T, sh.K, sh.N) << ", " << route_name(route) << ": wrote past a row";
        }
      }
}

// T = 1..9, 16, 17, every linear bucket edge of the built-in schedule table +-1, and T = 4096,
// 4097, 4100 (at and past the cuBLASLt variant's 4096-row chunk): the planner's choice and every
// variant against a float64 oracle, bf16 and f32 weights, x rows strided both 16-byte aligned (K +
// 4) and not (K + 1).
TEST(LinearGpu, BucketBoundariesMatchFloat64Oracle) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu linear bucket boundaries");
  auto gpu = make_cuda_backend();
  const auto routes = op_routes(*gpu, NINFER_OP_LINEAR);
  const ScheduleTable table = builtin_schedule_table(gpu->plugin(), gpu->device());
  // Decode sizes, the GEMV tiles' edges, cuBLASLt's 4096-row chunk edge, and the table's edges.
  std::vector<int64_t> tokens{1, 2, 3, 4, 5, 8, 9, 16, 17, 4096, 4097, 4100};
  for (const ScheduleEntry& e : table.entries)
    if (e.op == NINFER_OP_LINEAR)
      for (int64_t t : {e.tokens_min - 1, e.tokens_min, e.tokens_min + 1, e.tokens_max - 1, e.tokens_max,
                        e.tokens_max + 1})
        if (t >= 1 && t <= 4100) tokens.push_back(t);
  std::sort(tokens.begin(), tokens.end());
  tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
  const int32_t K = 512, N = 392;
  const int64_t Tmax = tokens.back();
  for (int32_t dtype : {NINFER_DTYPE_BF16, NINFER_DTYPE_F32})
    for (int64_t pad : {4, 1}) {
      const int64_t xs = K + pad, ys = N + 2;
      const auto x = randn(rng, static_cast<size_t>(Tmax * xs));
      const Weights w = random_weights(rng, dtype, K, N);
      // float64 oracle for every row once; a smaller T compares with its prefix.
      std::vector<double> oracle(static_cast<size_t>(Tmax * N));
      for (int64_t t = 0; t < Tmax; ++t)
        for (int32_t n = 0; n < N; ++n) {
          double acc = 0;
          for (int32_t k = 0; k < K; ++k)
            acc += static_cast<double>(x[static_cast<size_t>(t * xs + k)]) * w.f32[static_cast<size_t>(n) * K + k];
          oracle[static_cast<size_t>(t * N + n)] = acc;
        }
      LinearCall call(*gpu, x, xs, w, dtype, Tmax, K, N, ys);
      for (int64_t T : tokens) {
        ninfer_shape s = call.shape;
        s.tokens = T;
        ninfer_linear_args a = call.args;
        a.tokens = T;
        const std::vector<double> want(oracle.begin(), oracle.begin() + T * N);
        for (const std::string& route : routes) {
          const std::string variant = variant_for(*gpu, route, s);
          if (variant.empty()) continue;
          call.poison(*gpu);
          if (route.empty()) gpu->reserve_workspace(NINFER_OP_LINEAR, s); // as a model does at load
          run_route(*gpu, NINFER_OP_LINEAR, route, s, &a);
          const auto y = get<float>(*gpu, call.y, static_cast<size_t>(T * ys));
          const Mismatch m = check_route(variant, dtype, row_elements(y, T, N, ys), want);
          EXPECT_TRUE(m.ok) << describe(dtype, T, K, N) << " x stride " << xs << ", " << route_name(route) << " ("
                            << variant << "): " << describe_check(variant, dtype, m);
          EXPECT_TRUE(padding_still_poisoned(y, T, N, ys))
              << describe(dtype, T, K, N) << ", " << route_name(route) << ": wrote past a row";
        }
      }
    }
}

// Qwen-sized projections (Qwen3-8B: hidden 4096, qkv 6144, MLP 12288, lm_head 151,936;
// Qwen3.5-27B: hidden 5120, MLP 17408): every route against the CPU reference at decode and
// prefill token counts. linear_bench times the same shapes.
TEST(LinearGpu, ModelShapesMatchCpu) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu linear model shapes");
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  const auto routes = op_routes(*gpu, NINFER_OP_LINEAR);
  struct Shape {
    int32_t K, N;
    std::vector<int64_t> tokens;
  };
  const std::vector<Shape> shapes{{4096, 6144, {1, 2, 3, 5, 8, 64}},
                                  {12288, 4096, {1, 4, 8, 33}},
                                  {5120, 17408, {1, 2, 4, 8}},
                                  {17408, 5120, {1, 7, 8, 200}},
                                  {4096, 151936, {1, 8}}};
  for (int32_t dtype : {NINFER_DTYPE_BF16, NINFER_DTYPE_F32})
    for (const Shape& sh : shapes) {
      if (dtype == NINFER_DTYPE_F32 && sh.N > 20000) continue; // the bf16 rows cover the lm_head
      const int64_t Tmax = sh.tokens.back();
      const auto x = fast_random(rng, static_cast<size_t>(Tmax * sh.K), 1.f);
      const Weights w = random_weights(rng, dtype, sh.K, sh.N);
      // One CPU run at the largest T; rows are independent, so smaller T compare with its prefix.
      LinearCall ref(*cpu, x, sh.K, w, dtype, Tmax, sh.K, sh.N, sh.N);
      cpu->run(NINFER_OP_LINEAR, ref.shape, &ref.args);
      const auto want_all = get<float>(*cpu, ref.y, ref.y_elems);
      LinearCall call(*gpu, x, sh.K, w, dtype, Tmax, sh.K, sh.N, sh.N);
      for (int64_t T : sh.tokens) {
        ninfer_shape s = call.shape;
        s.tokens = T;
        ninfer_linear_args a = call.args;
        a.tokens = T;
        const std::vector<double> want(want_all.begin(), want_all.begin() + T * sh.N);
        for (const std::string& route : routes) {
          const std::string variant = variant_for(*gpu, route, s);
          if (variant.empty()) continue;
          call.poison(*gpu);
          if (route.empty()) gpu->reserve_workspace(NINFER_OP_LINEAR, s); // as a model does at load
          run_route(*gpu, NINFER_OP_LINEAR, route, s, &a);
          const Mismatch m =
              check_route(variant, dtype, get<float>(*gpu, call.y, static_cast<size_t>(T * sh.N)), want);
          EXPECT_TRUE(m.ok) << describe(dtype, T, sh.K, sh.N) << ", " << route_name(route) << " (" << variant
                            << "): " << describe_check(variant, dtype, m);
        }
      }
    }
}

// The CUDA-core GEMV variants (gemv_warp_t1, gemv_warp_t2: the run-time compiled jit_gemv kernel
// prebuilt, linear/linear_gemv_warp.cu) where decode runs them: one and two tokens (and three, a
// partial second tile of gemv_warp_t2) on Qwen3-8B's qkv (K 4096, N 6144) and down (K 12288, N
// 4096) projections and an odd N (the last CTA's last warp has one row), with x rows contiguous,
// strided but 16-byte aligned (the vector path) and strided off alignment (the scalar path), y
// rows strided with poisoned padding; against the CPU reference (`gpu-f32-vs-cpu-reference`:
// both keep x and the sums in float32). The planner's choice at one and two tokens (gemv_warp_t1 on
// the sm_89 / sm_120a tables, cuBLASLt on the H200's where the rows allow it) is checked on the
// same inputs, with the tolerance its arithmetic earns.
TEST(LinearGpu, CudaCoreGemvMatchesCpuAtDecodeTokenCounts) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu linear cuda-core gemv");
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  const std::vector<std::string> variants{"gemv_warp_t1", "gemv_warp_t2"};
  for (const std::string& name : variants)
    ASSERT_NE(gpu->plugin().find_variant(NINFER_OP_LINEAR, name), nullptr)
        << gpu->plugin().name() << " registers no linear/" << name;
  struct Shape {
    int32_t K, N;
  };
  const int64_t Tmax = 3;
  for (int32_t dtype : {NINFER_DTYPE_BF16, NINFER_DTYPE_F32})
    for (Shape sh : {Shape{4096, 6144}, Shape{12288, 4096}, Shape{4096, 1027}}) {
      const Weights w = random_weights(rng, dtype, sh.K, sh.N);
      const auto x = fast_random(rng, static_cast<size_t>(Tmax * sh.K), 1.f); // rows of K, contiguous
      // The CPU reference once, contiguous; rows do not depend on the stride they are read at.
      LinearCall ref(*cpu, x, sh.K, w, dtype, Tmax, sh.K, sh.N, sh.N);
      cpu->run(NINFER_OP_LINEAR, ref.shape, &ref.args);
      const auto want_all = get<float>(*cpu, ref.y, ref.y_elems);
      for (int64_t x_pad : {0, 8, 3}) {
        const int64_t xs = sh.K + x_pad, ys = sh.N + 3;
        std::vector<float> xpad(static_cast<size_t>(Tmax * xs), std::nanf("")); // padding never read
        for (int64_t t = 0; t < Tmax; ++t)
          std::copy_n(x.begin() + t * sh.K, sh.K, xpad.begin() + t * xs);
        LinearCall call(*gpu, xpad, xs, w, dtype, Tmax, sh.K, sh.N, ys);
        for (int64_t T = 1; T <= Tmax; ++T) {
          ninfer_shape s = call.shape;
          s.tokens = T;
          ninfer_linear_args a = call.args;
          a.tokens = T;
          const std::vector<double> want(want_all.begin(), want_all.begin() + T * sh.N);
          std::vector<std::string> routes = variants;
          if (T <= 2) routes.emplace_back(""); // the planner's decode choice, on strided rows too
          for (const std::string& route : routes) {
            const std::string variant = variant_for(*gpu, route, s);
            ASSERT_FALSE(variant.empty()) << route << " declines " << describe(dtype, T, sh.K, sh.N);
            call.poison(*gpu);
            if (route.empty()) gpu->reserve_workspace(NINFER_OP_LINEAR, s); // as a model does at load
            run_route(*gpu, NINFER_OP_LINEAR, route, s, &a);
            const auto y = get<float>(*gpu, call.y, static_cast<size_t>(T * ys));
            const Mismatch m = check_route(variant, dtype, row_elements(y, T, sh.N, ys), want);
            EXPECT_TRUE(m.ok) << describe(dtype, T, sh.K, sh.N) << " x stride " << xs << ", " << route_name(route)
                              << " (" << variant << "): " << describe_check(variant, dtype, m);
            EXPECT_TRUE(padding_still_poisoned(y, T, sh.N, ys))
                << describe(dtype, T, sh.K, sh.N) << ", " << route_name(route) << ": wrote past a row";
          }
        }
      }
    }
}

// The split-reduction GEMVs (gemv_4warps: each row's reduction across four warps, partial sums
// added in shared memory; linear/linear_gemv_4warps.cu; gemv_4warps_early_loads, the same with its
// launch wait after the first weight loads, must equal gemv_4warps bit for bit;
// gemv_4warps_one_wave: the same in one wave of resident CTAs that walk row blocks in turn, so the
// larger shapes give each CTA several blocks, with the next block's loads issued before the current
// one's sums; linear/linear_gemv_4warps_one_wave.cu) at one token, on the decode projections whose
// reductions split unevenly or not at all: Qwen3-8B's qkv and down, Qwen3.5-27B's down (K 17408:
// 2176 vectors, 544 per warp), an odd N (the last CTA has one output), a K of 13 vectors (slices of
// 4, 4, 4, 1) and of one vector (three idle warps); f32 and bf16 weights, x contiguous and strided;
// y rows strided with poisoned padding. Against the CPU reference (`gpu-f32-vs-cpu-reference`). x
// off 16-byte alignment is refused with an error, not computed wrong.
TEST(LinearGpu, SplitReductionGemvMatchesCpuAtOneToken) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu linear split-reduction gemv");
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  const std::vector<std::string> variants{"gemv_4warps", "gemv_4warps_early_loads", "gemv_4warps_one_wave"};
  for (const std::string& name : variants)
    ASSERT_NE(gpu->plugin().find_variant(NINFER_OP_LINEAR, name), nullptr)
        << gpu->plugin().name() << " registers no linear/" << name;
  struct Shape {
    int32_t K, N;
  };
  for (int32_t dtype : {NINFER_DTYPE_BF16, NINFER_DTYPE_F32})
    for (Shape sh : {Shape{4096, 6144}, Shape{12288, 4096}, Shape{17408, 96}, Shape{4096, 1027}, Shape{104, 37},
                     Shape{8, 5}}) {
      const Weights w = random_weights(rng, dtype, sh.K, sh.N);
      const auto x = fast_random(rng, static_cast<size_t>(sh.K), 1.f);
      LinearCall ref(*cpu, x, sh.K, w, dtype, 1, sh.K, sh.N, sh.N);
      cpu->run(NINFER_OP_LINEAR, ref.shape, &ref.args);
      const auto want_f = get<float>(*cpu, ref.y, ref.y_elems);
      const std::vector<double> want(want_f.begin(), want_f.end());
      const int64_t ys = sh.N + 3;
      for (int64_t x_offset : {0, 4}) { // x at the buffer's start, and 16 bytes into it
        std::vector<float> xpad(static_cast<size_t>(sh.K + x_offset), std::nanf(""));
        std::copy(x.begin(), x.end(), xpad.begin() + x_offset);
        LinearCall call(*gpu, xpad, sh.K, w, dtype, 1, sh.K, sh.N, ys);
        call.args.x += x_offset;
        std::vector<float> k4_bits; // gemv_4warps's output: gemv_4warps_early_loads moves only the launch wait
        for (const std::string& v : variants) {
          call.poison(*gpu);
          run_route(*gpu, NINFER_OP_LINEAR, v, call.shape, &call.args);
          const auto y = get<float>(*gpu, call.y, static_cast<size_t>(ys));
          const Mismatch m = check_route(v, dtype, row_elements(y, 1, sh.N, ys), want);
          EXPECT_TRUE(m.ok) << describe(dtype, 1, sh.K, sh.N) << " x offset " << x_offset << ", " << v << ": "
                            << describe_check(v, dtype, m);
          EXPECT_TRUE(padding_still_poisoned(y, 1, sh.N, ys)) << describe(dtype, 1, sh.K, sh.N) << ", " << v;
          const std::vector<float> rows = row_elements(y, 1, sh.N, ys);
          if (v == "gemv_4warps") k4_bits = rows;
          if (v == "gemv_4warps_early_loads")
            EXPECT_EQ(std::memcmp(rows.data(), k4_bits.data(), rows.size() * sizeof(float)), 0)
                << describe(dtype, 1, sh.K, sh.N) << ": gemv_4warps_early_loads differs from gemv_4warps in its bits";
        }
      }
      if (sh.K == 4096 && sh.N == 1027) { // x 4 bytes off alignment
        std::vector<float> xpad(static_cast<size_t>(sh.K + 1), 0.f);
        LinearCall call(*gpu, xpad, sh.K, w, dtype, 1, sh.K, sh.N, ys);
        call.args.x += 1;
        for (const std::string& v : variants)
          EXPECT_ANY_THROW(run_route(*gpu, NINFER_OP_LINEAR, v, call.shape, &call.args))
              << v << " ran on an x that is not 16-byte aligned";
      }
    }
}

// accumulate = 1: y += x.W^T on y's previous contents (the residual-stream update), for the
// planner's choice and every variant the plugin registers (those named below must be there),
// f32 and bf16 weights, decode and prefill token counts, a vector-path shape, a scalar-path one
// (K % 8 != 0, odd N) and a wide one. y starts as random y0 in its rows and NaN in the padding past
// each row (which must stay NaN); accumulate = 0 on the same inputs starts from all-NaN y, so a
// kernel that read y would fail. Oracle: float64 dot products, plus y0 when accumulating. For
// cublaslt with bf16 weights the `bf16-activation-rounding` bound applies to the product alone, so
// y0 is taken off its output first (a variant that dropped y0 is then off by |y0| ~ |x.W^T|, far
// past the 2^-8 bound).
TEST(LinearGpu, AccumulateAddsToYAndZeroIgnoresItInEveryVariant) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu linear accumulate");
  auto gpu = make_cuda_backend();
  const auto routes = op_routes(*gpu, NINFER_OP_LINEAR);
  for (const char* name : {"gemv_mma_t1", "gemv_mma_t2", "gemv_mma_t4", "gemv_mma_t8", "gemv_warp_t1", "gemv_warp_t2",
                           "gemv_4warps", "gemv_4warps_early_loads", "gemv_4warps_one_wave", "fma_tile64", "fma_tile128",
                           "cublaslt"})
    EXPECT_NE(gpu->plugin().find_variant(NINFER_OP_LINEAR, name), nullptr)
        << gpu->plugin().name() << " registers no linear/" << name;
  struct Shape {
    int32_t K, N;
    int64_t x_pad;
  };
  const std::vector<int64_t> tokens{1, 2, 5, 8, 64, 300};
  const int64_t Tmax = tokens.back();
  for (int32_t dtype : {NINFER_DTYPE_F32, NINFER_DTYPE_BF16})
    for (Shape sh : {Shape{512, 392, 4}, Shape{300, 257, 1}, Shape{2048, 1030, 0}}) {
      const int64_t xs = sh.K + sh.x_pad, ys = sh.N + 2;
      const auto x = randn(rng, static_cast<size_t>(Tmax * xs));
      const Weights w = random_weights(rng, dtype, sh.K, sh.N);
      std::vector<float> y0 = randn(rng, static_cast<size_t>(Tmax * ys));
      for (int64_t t = 0; t < Tmax; ++t) // the padding past each row: never read, never written
        for (int64_t n = sh.N; n < ys; ++n) y0[static_cast<size_t>(t * ys + n)] = std::nanf("");
      std::vector<double> dot(static_cast<size_t>(Tmax * sh.N)); // float64 x.W^T, all rows once
      for (int64_t t = 0; t < Tmax; ++t)
        for (int32_t n = 0; n < sh.N; ++n) {
          double acc = 0;
          for (int32_t k = 0; k < sh.K; ++k)
            acc += static_cast<double>(x[static_cast<size_t>(t * xs + k)]) * w.f32[static_cast<size_t>(n) * sh.K + k];
          dot[static_cast<size_t>(t * sh.N + n)] = acc;
        }
      const std::vector<float> y0_rows = row_elements(y0, Tmax, sh.N, ys);
      LinearCall call(*gpu, x, xs, w, dtype, Tmax, sh.K, sh.N, ys);
      for (int64_t T : tokens) {
        ninfer_shape s = call.shape;
        s.tokens = T;
        for (const std::string& route : routes) {
          const std::string variant = variant_for(*gpu, route, s);
          if (variant.empty()) continue; // e.g. cublaslt needs 16-byte rows
          if (route.empty()) gpu->reserve_workspace(NINFER_OP_LINEAR, s); // as a model does at load
          for (int32_t accumulate : {1, 0}) {
            ninfer_linear_args a = call.args;
            a.tokens = T;
            a.accumulate = accumulate;
            if (accumulate)
              gpu->upload(call.y, 0, y0.data(), static_cast<size_t>(T * ys) * sizeof(float));
            else
              call.poison(*gpu);
            run_route(*gpu, NINFER_OP_LINEAR, route, s, &a);
            const auto y = get<float>(*gpu, call.y, static_cast<size_t>(T * ys));
            std::vector<float> got = row_elements(y, T, sh.N, ys);
            std::vector<double> want(dot.begin(), dot.begin() + T * sh.N);
            if (accumulate)
              for (size_t i = 0; i < got.size(); ++i) {
                if (rounds_x_to_bf16(variant, dtype))
                  got[i] -= y0_rows[i];
                else
                  want[i] += y0_rows[i];
              }
            const Mismatch m = check_route(variant, dtype, got, want);
            EXPECT_TRUE(m.ok) << describe(dtype, T, sh.K, sh.N) << " accumulate=" << accumulate << ", "
                              << route_name(route) << " (" << variant << "): " << describe_check(variant, dtype, m);
            EXPECT_TRUE(padding_still_poisoned(y, T, sh.N, ys))
                << describe(dtype, T, sh.K, sh.N) << " accumulate=" << accumulate << ", " << route_name(route)
                << ": wrote past a row";
          }
        }
      }
    }
}
