// linear_bench: times the `linear` variants of the CUDA plugin on the real projection shapes of
// Qwen3-8B and Qwen3.5-27B (bf16 weights; a few float32 rows), against two ceilings measured
// here first: device-to-device copy bandwidth and a plain cuBLASLt bf16 GEMM.
//
// Not a test (no assertions; tests/gpu_ops/linear_test.cpp checks correctness): the evidence for
// arch/schedules/sm_*.yaml and docs/cuda-pointwise-linear.md. Method (METHOD.md):
//   - each figure is the median of 7 batches of back-to-back launches (CUDA events around a
//     batch, after a warm-up batch), as a decode step issues them;
//   - weights are rotated over enough copies that a batch streams >= 4x the L2 between reuses of
//     one copy, so the figures are DRAM figures, never L2 ones; x is reused (it is hot in a real
//     step too);
//   - random data (never zeros), filled on the device.
// Usage: linear_bench [--quick]    (plugins and data found as for the installed tools)
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ninfer/abi/ops/linear.h"
#include "ninfer/devices/device.hpp"
#include "ninfer/support/paths.hpp"
#include "ninfer/planning/planner.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/runtime/backend.hpp"

namespace {

#define CK(call)                                                                                       \
  do {                                                                                                 \
    cudaError_t e_ = (call);                                                                           \
    if (e_ != cudaSuccess) {                                                                           \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));      \
      std::exit(1);                                                                                    \
    }                                                                                                  \
  } while (0)

__device__ uint32_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return static_cast<uint32_t>(z ^ (z >> 31));
}

// Uniform in [-scale, scale), from a counter-based hash: random, reproducible, never zero-filled.
__global__ void fill_f32(float* p, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = scale * (static_cast<float>(mix(seed * 0x9e3779b97f4a7c15ull + i) >> 8) * 0x1p-23f - 1.f);
}
__global__ void fill_bf16(__nv_bfloat16* p, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = __float2bfloat16(scale * (static_cast<float>(mix(seed * 0x9e3779b97f4a7c15ull + i) >> 8) * 0x1p-23f - 1.f));
}

cudaStream_t g_timing_stream = nullptr; // events are recorded on the stream the work runs on

template <class F>
double median_seconds(F&& batch, int reps) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  batch(); // warm-up: module load, handles, heuristics, clocks
  CK(cudaDeviceSynchronize());
  std::vector<double> t;
  for (int i = 0; i < 7; ++i) {
    CK(cudaEventRecord(a, g_timing_stream));
    batch();
    CK(cudaEventRecord(b, g_timing_stream));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e-3 / reps);
  }
  CK(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double copy_bandwidth_gbs() {
  const size_t bytes = size_t(2) << 30;
  void *src, *dst;
  CK(cudaMalloc(&src, bytes));
  CK(cudaMalloc(&dst, bytes));
  fill_f32<<<1024, 256>>>(static_cast<float*>(src), bytes / 4, 1, 1.f);
  const double s = median_seconds([&] { CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice)); }, 1);
  CK(cudaFree(src));
  CK(cudaFree(dst));
  return 2.0 * bytes / s / 1e9; // read + write
}

// A plain cuBLASLt bf16 GEMM, M = N = K = 8192, bf16 out, float32 accumulate: the tensor-core
// ceiling for the cublaslt variant's figures.
double cublaslt_peak_tflops() {
  const int n = 8192;
  __nv_bfloat16 *a, *b, *c;
  CK(cudaMalloc(&a, size_t(n) * n * 2));
  CK(cudaMalloc(&b, size_t(n) * n * 2));
  CK(cudaMalloc(&c, size_t(n) * n * 2));
  fill_bf16<<<1024, 256>>>(a, size_t(n) * n, 2, 1.f);
  fill_bf16<<<1024, 256>>>(b, size_t(n) * n, 3, 1.f);
  const size_t ws_bytes = 32u << 20;
  void* ws;
  CK(cudaMalloc(&ws, ws_bytes));
  cublasLtHandle_t h;
  cublasLtCreate(&h);
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof nn);
  cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, n, n, n);
  cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, n, n, n);
  cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, n, n, n);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes);
  cublasLtMatmulHeuristicResult_t r{};
  int found = 0;
  cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 1, &r, &found);
  double tflops = 0;
  if (found) {
    const float one = 1.f, zero = 0.f;
    const double s = median_seconds(
        [&] {
          for (int i = 0; i < 5; ++i)
            cublasLtMatmul(h, op, &one, a, la, b, lb, &zero, c, lc, c, lc, &r.algo, ws, ws_bytes, nullptr);
        },
        5);
    tflops = 2.0 * n * n * double(n) / s / 1e12;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(op);
  cublasLtDestroy(h);
  CK(cudaFree(a));
  CK(cudaFree(b));
  CK(cudaFree(c));
  CK(cudaFree(ws));
  return tflops;
}

struct Shape {
  const char* what;
  int32_t K, N;
};

struct Bench {
  ninfer::Backend& be;
  double copy_gbs, peak_tflops;
  void* ws = nullptr;
  size_t ws_bytes = 0;
  cudaStream_t stream = nullptr;

  // Seconds per call of `route` ("" = the planner's choice) at T tokens, weights rotated over
  // `w` copies: eager launches, and (into *graph_s) the same batch captured as one CUDA graph
  // and replayed, as decode steps will run.
  double time(const std::string& route, int32_t dtype, const std::vector<void*>& w, const float* x, float* y, int64_t T,
              int32_t K, int32_t N, std::string* chosen, double* graph_s) {
    const ninfer_shape s{T, {K, N, 0, 0}, dtype};
    ninfer::Plan plan;
    try {
      plan = route.empty() ? be.plan(NINFER_OP_LINEAR, s)
                           : be.planner().plan_variant(*be.plugin().find_variant(NINFER_OP_LINEAR, route), s);
    } catch (const std::exception& e) {
      return -1;
    }
    if (chosen) *chosen = plan.variant;
    if (plan.workspace_bytes > ws_bytes) {
      if (ws) CK(cudaFree(ws));
      ws_bytes = plan.workspace_bytes;
      CK(cudaMalloc(&ws, ws_bytes));
    }
    const double once = median_seconds(
        [&] {
          ninfer_linear_args a{x, K, w[0], y, N, T, K, N, dtype, /*accumulate=*/0};
          ninfer::execute(plan, &a, ws, stream);
        },
        1);
    const int reps = static_cast<int>(std::max<size_t>(w.size(), std::min<size_t>(200, size_t(3e-3 / once) + 1)));
    auto batch = [&] {
      for (int i = 0; i < reps; ++i) {
        ninfer_linear_args a{x, K, w[i % w.size()], y, N, T, K, N, dtype, /*accumulate=*/0};
        ninfer::execute(plan, &a, ws, stream);
      }
    };
    const double eager = median_seconds(batch, reps);
    *graph_s = -1;
    cudaGraph_t g = nullptr;
    cudaGraphExec_t ge = nullptr;
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
      bool ok = true;
      try {
        batch();
      } catch (const std::exception& e) {
        ok = false;
        std::fprintf(stderr, "capture of %s failed: %s\n", plan.variant.c_str(), e.what());
      }
      ok = cudaStreamEndCapture(stream, &g) == cudaSuccess && ok;
      if (ok && cudaGraphInstantiate(&ge, g, 0) == cudaSuccess)
        *graph_s = median_seconds([&] { CK(cudaGraphLaunch(ge, stream)); }, reps);
      if (ge) cudaGraphExecDestroy(ge);
      if (g) cudaGraphDestroy(g);
    }
    cudaGetLastError();
    return eager;
  }

  void run_shape(const Shape& sh, int32_t dtype, const std::vector<int64_t>& tokens,
                 const std::vector<std::string>& routes) {
    const size_t wbytes = size_t(sh.K) * sh.N * (dtype == NINFER_DTYPE_BF16 ? 2 : 4);
    const size_t copies = std::max<size_t>(1, (size_t(256) << 20) / wbytes + 1);
    std::vector<void*> w(copies);
    for (size_t i = 0; i < copies; ++i) {
      CK(cudaMalloc(&w[i], wbytes));
      if (dtype == NINFER_DTYPE_BF16)
        fill_bf16<<<2048, 256>>>(static_cast<__nv_bfloat16*>(w[i]), wbytes / 2, 10 + i, 0.02f);
      else
        fill_f32<<<2048, 256>>>(static_cast<float*>(w[i]), wbytes / 4, 10 + i, 0.02f);
    }
    const int64_t Tmax = *std::max_element(tokens.begin(), tokens.end());
    float *x, *y;
    CK(cudaMalloc(&x, size_t(Tmax) * sh.K * 4));
    CK(cudaMalloc(&y, size_t(Tmax) * sh.N * 4));
    fill_f32<<<2048, 256>>>(x, size_t(Tmax) * sh.K, 99, 1.f);
    CK(cudaDeviceSynchronize());
    for (int64_t T : tokens)
      for (const std::string& route : routes) {
        std::string chosen;
        double gs = -1;
        const double s = time(route, dtype, w, x, y, T, sh.K, sh.N, &chosen, &gs);
        if (s < 0) continue;
        const double gbs = wbytes / s / 1e9, ggbs = gs > 0 ? wbytes / gs / 1e9 : 0;
        const double tflops = 2.0 * T * sh.N * double(sh.K) / s / 1e12;
        const std::string name = route.empty() ? "planner:" + chosen : route;
        std::printf("%-12s %-4s %6d %7d %5lld  %-18s %10.2f %8.0f %6.1f%% %8.1f %6.1f%% %10.2f %8.0f %6.1f%%\n",
                    sh.what, dtype == NINFER_DTYPE_BF16 ? "bf16" : "f32", sh.K, sh.N, static_cast<long long>(T),
                    name.c_str(), s * 1e6, gbs, 100 * gbs / copy_gbs, tflops,
                    peak_tflops > 0 ? 100 * tflops / peak_tflops : 0.0, gs * 1e6, ggbs, 100 * ggbs / copy_gbs);
        std::fflush(stdout);
      }
    for (void* p : w) CK(cudaFree(p));
    CK(cudaFree(x));
    CK(cudaFree(y));
  }
};

} // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const ninfer::Discovery d = ninfer::discover_devices();
  if (d.cuda.empty()) {
    std::fprintf(stderr, "linear_bench: no CUDA device (%s)\n", d.note.c_str());
    return 2;
  }
  ninfer::PluginHost plugins;
  plugins.load_directory(ninfer::default_plugin_dir());
  ninfer::Backend be(plugins, d.cuda.front());
  Bench b{be, copy_bandwidth_gbs(), cublaslt_peak_tflops()};
  CK(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking));
  g_timing_stream = b.stream;
  std::printf("linear_bench on %s (%s, %d SMs), plugin %s\n", be.device().name, be.device().arch,
              be.device().sm_count, be.plugin().name().c_str());
  std::printf("ceilings: device-to-device copy %.0f GB/s (read + write); cuBLASLt bf16 GEMM 8192^3 %.1f TFLOP/s\n",
              b.copy_gbs, b.peak_tflops);
  std::printf("GB/s = weight bytes / time; %%copy = of the copy bandwidth; %%gemm = of the GEMM rate; first figures:\n"
              "eager back-to-back launches, last three: the same launches captured in one CUDA graph and replayed\n");
  std::printf("%-12s %-4s %6s %7s %5s  %-18s %10s %8s %7s %8s %7s %10s %8s %7s\n", "shape", "W", "K", "N", "T", "route",
              "us/call", "GB/s", "%copy", "TFLOP/s", "%gemm", "graph us", "GB/s", "%copy");

  const std::vector<Shape> decode{
      {"8b.qkv", 4096, 6144},      {"8b.o", 4096, 4096},        {"8b.gate_up", 4096, 24576},
      {"8b.down", 12288, 4096},    {"8b.lm_head", 4096, 151936}, {"27b.gdn_qkv", 5120, 10240},
      {"27b.attn_q", 5120, 12288}, {"27b.o", 6144, 5120},        {"27b.gate_up", 5120, 34816},
      {"27b.down", 17408, 5120},   {"27b.lm_head", 5120, 248320}};
  // Decode: the planner's choice at every T up to 8, each GEMV tile that holds T (a smaller
  // one re-reads W), and cuBLASLt.
  for (const Shape& sh : decode)
    for (int64_t T : {1, 2, 3, 4, 5, 8}) {
      std::vector<std::string> routes{""};
      if (!quick) {
        for (int tile : {1, 2, 4, 8})
          if (tile >= T) routes.push_back("gemv_mma_t" + std::to_string(tile));
        for (int tile : {1, 2}) // the CUDA-core GEMV (jit_gemv_t128_r2_v8 prebuilt)
          if (tile >= T) routes.push_back("gemv_warp_t" + std::to_string(tile));
        routes.push_back("cublaslt");
      }
      b.run_shape(sh, NINFER_DTYPE_BF16, {T}, routes);
    }
  // The crossover from GEMV to cuBLASLt, and prefill.
  const std::vector<Shape> prefill{{"8b.qkv", 4096, 6144}, {"8b.gate_up", 4096, 24576}, {"8b.down", 12288, 4096},
                                   {"27b.gate_up", 5120, 34816}, {"27b.down", 17408, 5120}};
  for (const Shape& sh : prefill) {
    b.run_shape(sh, NINFER_DTYPE_BF16, {8, 12, 16, 24, 32, 48, 64, 96, 128},
                {"", "gemv_mma_t8", "cublaslt", "fma_tile64"});
    b.run_shape(sh, NINFER_DTYPE_BF16, {256, 512, 1024, 2048, 4096, 8192}, {"", "cublaslt"});
  }
  b.run_shape({"8b.o", 4096, 4096}, NINFER_DTYPE_BF16, {256, 1024}, {"fma_tile64", "fma_tile128"});
  // float32 weights share the schedule table: where does cuBLASLt's exact float32 win?
  b.run_shape({"8b.o", 4096, 4096}, NINFER_DTYPE_F32, {1, 8, 16, 32, 64, 128, 256, 1024, 4096},
              {"", "gemv_mma_t8", "fma_tile64", "fma_tile128", "cublaslt"});
  // float32 weights at one token: the CUDA-core GEMV routed there (gemv_warp_t1) against
  // gemv_mma_t1's.
  b.run_shape({"8b.o", 4096, 4096}, NINFER_DTYPE_F32, {1}, {"gemv_mma_t1", "gemv_warp_t1"});
  b.run_shape({"8b.down", 12288, 4096}, NINFER_DTYPE_F32, {1}, {"gemv_mma_t1", "gemv_warp_t1"});
  return 0;
}
