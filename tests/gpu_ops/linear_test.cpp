// linear on the CUDA plugin against the CPU reference plugin: every variant (GEMV-style for
// decode, tiled for prefill) and the planner's choice, float32 and bfloat16 weights, at token
// counts on both sides of every tile size and shapes that are not multiples of any tile, with
// poisoned outputs and strided rows. A second test runs model-sized decode and prefill shapes,
// checks them the same way, and reports how fast each variant reads the weights.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "gpu_op_env.hpp"
#include "ninfer/abi/ops/linear.h"
#include "ninfer/arch_catalog.hpp"
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
        args{x.as<float>(), x_stride, w.data(), y.as<float>(), y_stride, T, K, N, dtype},
        shape{T, {K, N, 0, 0}, dtype},
        y_elems(T * y_stride) {}

  void poison(Backend& be) {
    be.upload(y, 0, std::vector<float>(static_cast<size_t>(y_elems), std::nanf("")).data(), y_elems * sizeof(float));
  }
};

// GPU seconds per call of `plan`: CUDA events around back-to-back launches on the default
// stream (execute() with a null stream), one call first to size the repetitions (~50 ms).
double seconds_per_call(const Plan& plan, const ninfer_linear_args& a) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  auto timed = [&](int reps) {
    cudaEventRecord(start, nullptr);
    for (int i = 0; i < reps; ++i) execute(plan, &a, nullptr, nullptr);
    cudaEventRecord(stop, nullptr);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    return ms * 1e-3 / reps;
  };
  const double once = timed(1);
  const double per_call = timed(std::max(3, std::min(200, static_cast<int>(0.05 / std::max(once, 1e-7)))));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return per_call;
}

std::string describe(int32_t dtype, int64_t T, int32_t K, int32_t N) {
  return std::string(dtype == NINFER_DTYPE_F32 ? "f32" : "bf16") + " weights, T=" + std::to_string(T) + " K=" +
         std::to_string(K) + " N=" + std::to_string(N);
}

} // namespace

// K: multiples of 8 (16-byte weight rows) and not (scalar path), shorter than one warp step
// and longer than a k-tile; N: odd, below one GEMV row block, not a multiple of any tile.
// T: 1..8 are the GEMV tiles, 16/17 and 64 straddle tiled64, 255 and 1000 tiled128.
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
    for (Shape sh : {Shape{300, 257, 3}, Shape{256, 130, 0}, Shape{7, 3, 1}, Shape{1000, 515, 0}, Shape{129, 1, 2}})
      for (int64_t T : {1, 2, 3, 7, 16, 17, 64, 255, 1000}) {
        const int64_t xs = sh.K + sh.x_pad, ys = sh.N + 2;
        const auto x = randn(rng, static_cast<size_t>(T * xs));
        const Weights w = random_weights(rng, dtype, sh.K, sh.N);
        LinearCall ref(*cpu, x, xs, w, dtype, T, sh.K, sh.N, ys);
        cpu->run(NINFER_OP_LINEAR, ref.shape, &ref.args);
        const auto want = row_elements(get<float>(*cpu, ref.y, ref.y_elems), T, sh.N, ys);
        LinearCall call(*gpu, x, xs, w, dtype, T, sh.K, sh.N, ys);
        for (const std::string& route : routes) {
          call.poison(*gpu);
          run_route(*gpu, NINFER_OP_LINEAR, route, call.shape, &call.args);
          const auto y = get<float>(*gpu, call.y, call.y_elems);
          const Mismatch m = compare(row_elements(y, T, sh.N, ys), widen(want), kGpuVsCpuF32);
          EXPECT_TRUE(m.ok) << describe(dtype, T, sh.K, sh.N) << ", " << route_name(route) << ": " << m.describe();
          EXPECT_TRUE(padding_still_poisoned(y, T, sh.N, ys))
              << describe(dtype, T, sh.K, sh.N) << ", " << route_name(route) << ": wrote past a row";
        }
      }
}

// Qwen-sized projections (hidden 4096 and 5120, MLP 12288 and 17408, a 151,936-word lm_head):
// every route against the CPU reference, then timed. The table printed is the evidence for the
// schedule table's linear entries: microseconds per call and the weight bytes read per second.
TEST(LinearGpu, ModelShapesMatchCpuAndReportWeightBandwidth) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("gpu linear model shapes");
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  const auto routes = op_routes(*gpu, NINFER_OP_LINEAR);
  double datasheet_gbs = gpu->device().memory_bandwidth_gbs;
  try { // the datasheet figure is only for the report's %peak column
    if (datasheet_gbs <= 0)
      if (const KnownDevice* k = ArchCatalog::load_default().find_device(gpu->device().name))
        datasheet_gbs = k->bandwidth_gbs;
  } catch (const std::exception&) {
  }
  struct Shape {
    int32_t K, N;
    std::vector<int64_t> tokens;
  };
  const std::vector<int64_t> sweep{1, 2, 3, 4, 8, 16, 32, 64, 128, 256};
  std::vector<int64_t> sweep512 = sweep;
  sweep512.push_back(512);
  const std::vector<Shape> shapes{{4096, 4096, sweep512},
                                  {4096, 12288, sweep},
                                  {12288, 4096, sweep},
                                  {5120, 17408, {1, 2, 4, 8, 64, 256}},
                                  {17408, 5120, {1, 2, 4, 8, 64, 256}},
                                  {4096, 151936, {1, 2, 4, 8}}};
  std::printf("\nlinear on %s (datasheet bandwidth %.0f GB/s); GB/s = weight bytes / time\n",
              gpu->device().name, datasheet_gbs);
  std::printf("%-5s %6s %7s %5s  %-16s %10s %9s %7s\n", "dtype", "K", "N", "T", "route", "us/call", "GB/s", "%peak");
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
      const double weight_bytes = static_cast<double>(sh.K) * sh.N * (dtype == NINFER_DTYPE_F32 ? 4 : 2);
      for (int64_t T : sh.tokens) {
        ninfer_shape s = call.shape;
        s.tokens = T;
        ninfer_linear_args a = call.args;
        a.tokens = T;
        const std::vector<double> want(want_all.begin(), want_all.begin() + T * sh.N);
        for (const std::string& route : routes) {
          call.poison(*gpu);
          run_route(*gpu, NINFER_OP_LINEAR, route, s, &a);
          const Mismatch m = compare(get<float>(*gpu, call.y, static_cast<size_t>(T * sh.N)), want, kGpuVsCpuF32);
          EXPECT_TRUE(m.ok) << describe(dtype, T, sh.K, sh.N) << ", " << route_name(route) << ": " << m.describe();
          gpu->synchronize(); // the backend's stream is done before the default stream starts timing
          const Plan plan = route.empty() ? gpu->plan(NINFER_OP_LINEAR, s)
                                          : gpu->planner().plan_variant(
                                                *gpu->plugin().find_variant(NINFER_OP_LINEAR, route), s);
          const double sec = seconds_per_call(plan, a);
          const std::string name = route.empty() ? "planner:" + plan.variant : route;
          const double gbs = weight_bytes / sec / 1e9;
          std::printf("%-5s %6d %7d %5lld  %-16s %10.1f %9.0f %6.0f%%\n", dtype == NINFER_DTYPE_F32 ? "f32" : "bf16",
                      sh.K, sh.N, static_cast<long long>(T), name.c_str(), sec * 1e6, gbs,
                      datasheet_gbs > 0 ? 100 * gbs / datasheet_gbs : 0.0);
        }
      }
    }
}
