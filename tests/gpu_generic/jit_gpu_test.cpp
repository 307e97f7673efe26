// NVRTC kernels on the live GPU: compiled for its architecture, loaded through the driver API,
// resources read from the loaded function, results checked against the CPU, and the kernel
// cache making the second start faster (both times printed; no timing assertion).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>

#include "ninfer/devices/device.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/jit/nvrtc.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace ninfer;
using namespace ninfer::jit;

namespace {

// A block-tiled "y = x * Scale + sum of the tile" kernel: a template parameter by name
// expression, the tile by -D, a static shared array whose size the loaded function must report.
const char* kTileSource = R"(
template <int Scale>
__global__ void __launch_bounds__(TILE) tile_scale(const float* x, float* y, int n) {
  __shared__ float tile[TILE];
  const int i = blockIdx.x * TILE + threadIdx.x;
  tile[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int s = TILE / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) tile[threadIdx.x] += tile[threadIdx.x + s];
    __syncthreads();
  }
  if (i < n) y[i] = x[i] * Scale + tile[0];
}
)";

struct Live {
  bool ok = false;
  std::string why;
  ninfer_device_info dev{};
};

Live live() {
  Live l;
  const Discovery d = discover_devices();
  if (d.cuda.empty()) {
    l.why = "no CUDA device (" + d.note + ")";
    return l;
  }
  l.dev = d.cuda.front();
  l.ok = true;
  return l;
}

#define REQUIRE_LIVE_GPU(var)              \
  const Live var = live();                 \
  if (!var.ok) GTEST_SKIP() << var.why

CompileRequest request(const ninfer_device_info& d, int scale, int tile) {
  CompileRequest r;
  r.name = "gpu_test/tile_scale" + std::to_string(scale) + "_t" + std::to_string(tile);
  r.source = kTileSource;
  r.options = {"-DTILE=" + std::to_string(tile)};
  r.name_expressions = {"tile_scale<" + std::to_string(scale) + ">"};
  r.cc_major = d.cc_major;
  r.cc_minor = d.cc_minor;
  return r;
}

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("ninfer-gpu-jit-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

} // namespace

TEST(GpuJit, CompiledLoadedAndRunMatchesTheCpu) {
  REQUIRE_LIVE_GPU(g);
  auto rng = test::fresh_rng("GpuJit");
  for (int tile : {64, 256}) {
    const int scale = 2 + int(rng() % 5);
    const CompiledKernel k = compile(request(g.dev, scale, tile), nullptr);
    const LoadedModule m(k);
    const std::string expr = "tile_scale<" + std::to_string(scale) + ">";
    const ninfer_kernel_resources r = m.resources(expr, tile);
    EXPECT_EQ(r.max_threads_per_block, tile) << "__launch_bounds__(TILE)";
    EXPECT_EQ(r.static_smem_bytes, tile * int(sizeof(float))) << "__shared__ float tile[TILE]";
    EXPECT_GT(r.registers_per_thread, 0);
    EXPECT_LE(r.registers_per_thread, 255);
    EXPECT_EQ(std::string(r.symbol), k.lowered_name(expr));
    const int n = 1000 + int(rng() % 5000);
    std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    std::uniform_real_distribution<float> u(-1, 1);
    for (float& v : x) v = u(rng);
    float *dx = nullptr, *dy = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dx), n * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dy), n * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    int nn = n;
    void* params[] = {&dx, &dy, &nn};
    m.launch(expr, unsigned((n + tile - 1) / tile), unsigned(tile), 0, nullptr, params);
    ASSERT_EQ(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(dx);
    cudaFree(dy);
    double worst = 0;
    for (int b = 0; b * tile < n; ++b) {
      double sum = 0; // float64 oracle of the tile sum
      for (int i = b * tile; i < std::min(n, (b + 1) * tile); ++i) sum += x[size_t(i)];
      for (int i = b * tile; i < std::min(n, (b + 1) * tile); ++i)
        worst = std::max(worst, std::abs(double(y[size_t(i)]) - (double(x[size_t(i)]) * scale + sum)));
    }
    const double kTol = 1e-4; // a float32 tree sum of <= 256 values in [-1, 1]
    EXPECT_LE(worst, kTol) << "tile " << tile;
  }
}

TEST(GpuJit, SecondStartComesFromTheCache) {
  REQUIRE_LIVE_GPU(g);
  const KernelCache cache(fresh_dir("starts"));
  const CompileRequest r = request(g.dev, 3, 128);
  using clock = std::chrono::steady_clock;
  auto start = [&] {
    const auto t0 = clock::now();
    const CompiledKernel k = compile(r, &cache);
    const LoadedModule m(k);
    (void)m.resources("tile_scale<3>", 128);
    return std::pair{k.from_cache, std::chrono::duration<double, std::milli>(clock::now() - t0).count()};
  };
  const auto [cold_hit, cold_ms] = start();
  const auto [warm_hit, warm_ms] = start();
  EXPECT_FALSE(cold_hit);
  EXPECT_TRUE(warm_hit);
  std::printf("[jit-cache] first start (NVRTC compile + load) %.1f ms, second start (cache hit + load) %.1f ms\n",
              cold_ms, warm_ms);
  RecordProperty("cold_ms", std::to_string(cold_ms));
  RecordProperty("warm_ms", std::to_string(warm_ms));
  fs::remove_all(cache.dir());
}

TEST(GpuJit, CompileErrorNamesTheVariant) {
  REQUIRE_LIVE_GPU(g);
  CompileRequest r = request(g.dev, 2, 128);
  r.name = "linear/tile128_bad";
  r.source += "\n__global__ void broken() { undefined_symbol_here(); }\n";
  try {
    compile(r, nullptr);
    FAIL() << "expected a compile error";
  } catch (const Error& e) {
    const std::string m = e.what();
    std::printf("[jit-error] %s\n", m.c_str());
    EXPECT_NE(m.find("linear/tile128_bad"), std::string::npos) << m;
    EXPECT_NE(m.find("undefined_symbol_here"), std::string::npos) << m;
  }
}
