// Measures the bandwidth and matrix-product rate of the backend's device (see rooflines.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "ninfer/abi/ops/linear.h"
#include "ninfer/support/error.hpp"
#include "rooflines.hpp"

#ifdef NINFER_BENCH_CUDA
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#endif

namespace ninfer::tools {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

template <class F>
double best_of(int runs, F&& f) { // the fastest run: rates are upper bounds of what the card does
  double best = 1e30;
  for (int i = 0; i < runs; ++i) best = std::min(best, f());
  return best;
}

DeviceRates host_rates(Backend& be) {
  DeviceRates r;
  const size_t bytes = size_t{256} << 20;
  std::vector<char> a(bytes, 1), b(bytes);
  const double t = best_of(5, [&] {
    const auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    return seconds_since(t0);
  });
  r.bandwidth = 2.0 * static_cast<double>(bytes) / t;
  r.bandwidth_how = "memcpy of 256 MiB (read + write)";

  const int64_t T = 512, K = 2048, N = 2048;
  DeviceBuffer x = be.allocate(T * K * 4, MemoryUse::Workspace, "bench matmul x");
  DeviceBuffer w = be.allocate(N * K * 4, MemoryUse::Workspace, "bench matmul w");
  DeviceBuffer y = be.allocate(T * N * 4, MemoryUse::Workspace, "bench matmul y");
  be.zero(x, 0, x.bytes());
  be.zero(w, 0, w.bytes());
  const ninfer_linear_args args{x.as<float>(), K, w.data(), y.as<float>(), N, T, static_cast<int32_t>(K),
                                static_cast<int32_t>(N), NINFER_DTYPE_F32, /*accumulate=*/0};
  const ninfer_shape shape{T, {K, N, 0, 0}, NINFER_DTYPE_F32};
  be.run(NINFER_OP_LINEAR, shape, &args);
  be.synchronize();
  const double tm = best_of(3, [&] {
    const auto t0 = Clock::now();
    be.run(NINFER_OP_LINEAR, shape, &args);
    be.synchronize();
    return seconds_since(t0);
  });
  r.matmul = 2.0 * T * K * N / tm;
  r.matmul_how = fmt::format("the plugin's f32 linear op, {}x{}x{}", T, K, N);
  return r;
}

#ifdef NINFER_BENCH_CUDA
void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw Error(fmt::format("measuring the device: {}: {}", what, cudaGetErrorString(rc)));
}
void check(cublasStatus_t rc, const char* what) {
  if (rc != CUBLAS_STATUS_SUCCESS) throw Error(fmt::format("measuring the device: {}: cuBLAS status {}", what, static_cast<int>(rc)));
}

// Times `f` (which enqueues work on `s`) with events: the best of `runs` after one warm-up.
template <class F>
double event_time(cudaStream_t s, int runs, F&& f) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  f();
  const double t = best_of(runs, [&] {
    cudaEventRecord(a, s);
    f();
    cudaEventRecord(b, s);
    check(cudaEventSynchronize(b), "timed work");
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    return ms * 1e-3;
  });
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return t;
}

DeviceRates cuda_rates(Backend& be) {
  DeviceRates r;
  check(cudaSetDevice(be.device().ordinal), "cudaSetDevice");
  cudaStream_t s = static_cast<cudaStream_t>(nullptr);
  check(cudaStreamCreate(&s), "cudaStreamCreate");
  {
    const size_t bytes = size_t{2} << 30; // far beyond L2: the copy streams HBM
    void *src = nullptr, *dst = nullptr;
    check(cudaMalloc(&src, bytes), "cudaMalloc (2 GiB copy source)");
    check(cudaMalloc(&dst, bytes), "cudaMalloc (2 GiB copy target)");
    cudaMemsetAsync(src, 1, bytes, s);
    const double t = event_time(s, 10, [&] { cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s); });
    cudaFree(src);
    cudaFree(dst);
    r.bandwidth = 2.0 * static_cast<double>(bytes) / t;
    r.bandwidth_how = "device-to-device copy of 2 GiB (read + write)";
  }
  {
    const int n = 8192;
    const size_t elems = size_t{n} * n;
    void *a = nullptr, *b = nullptr, *c = nullptr;
    check(cudaMalloc(&a, elems * 2), "cudaMalloc (GEMM A)");
    check(cudaMalloc(&b, elems * 2), "cudaMalloc (GEMM B)");
    check(cudaMalloc(&c, elems * 4), "cudaMalloc (GEMM C)");
    // Random-looking bits (not zeros: a product of zeros runs faster than real data).
    std::vector<__nv_bfloat16> h(elems);
    uint32_t st = 12345;
    for (auto& v : h) {
      st = st * 1664525u + 1013904223u;
      v = __float2bfloat16(static_cast<float>(static_cast<int32_t>(st >> 8) - (1 << 23)) / (1 << 23));
    }
    check(cudaMemcpy(a, h.data(), elems * 2, cudaMemcpyHostToDevice), "GEMM upload");
    check(cudaMemcpy(b, h.data(), elems * 2, cudaMemcpyHostToDevice), "GEMM upload");
    cublasHandle_t handle = nullptr;
    check(cublasCreate(&handle), "cublasCreate");
    check(cublasSetStream(handle, s), "cublasSetStream");
    const float one = 1.0f, zero = 0.0f;
    const double t = event_time(s, 10, [&] {
      check(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b, CUDA_R_16BF, n, &zero,
                         c, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx");
    });
    cublasDestroy(handle);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    r.matmul = 2.0 * n * static_cast<double>(n) * n / t;
    r.matmul_how = "cuBLAS bf16 GEMM 8192^3, f32 accumulate and output";
  }
  cudaStreamDestroy(s);
  return r;
}
#endif

} // namespace

DeviceRates measure_device_rates(Backend& be) {
  if (be.device().kind == NINFER_DEVICE_CPU) return host_rates(be);
#ifdef NINFER_BENCH_CUDA
  return cuda_rates(be);
#else
  throw Error("this ninfer-bench was built without CUDA: it cannot measure a CUDA device");
#endif
}

} // namespace ninfer::tools
