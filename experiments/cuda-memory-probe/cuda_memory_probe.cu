// cuda-memory-probe: what does a CUDA device take beside the buffers a program allocates? The
// memory plan's estimates (docs/memory.md, "Estimates"; ninfer/models/memory_plan.hpp and
// allocator_overhead) rest on three answers, each read as the drop of cudaMemGetInfo's free
// memory:
//   context   a process's CUDA context and a cuBLASLt handle that has run one bf16 product
//             (total minus free once both exist: nothing else is on the card);
//   cudaMalloc  what `count` buffers of each size take, per buffer, against their bytes (the
//             granule the allocator rounds a buffer up to);
//   graphs    what one instantiated graph of `launches` kernel launches takes (a decode recording
//             of a 64-layer model is a few hundred launches).
//
// Built with the CUDA plugins (bin/cuda-memory-probe, never installed), or alone with the toolkit:
//   nvcc -O2 -std=c++17 -arch=sm_90 -o cuda-memory-probe cuda_memory_probe.cu -lcublasLt
// Run: cuda-memory-probe (one line per measurement; nothing else may use the card meanwhile).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(rc));
    std::exit(1);
  }
}

size_t free_bytes() {
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return free;
}

double mib(double bytes) { return bytes / double(1 << 20); }

__global__ void touch(float* p, int n, float a, float b, float c, float d) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] * a + b * c - d;
}

// One bf16 product through cuBLASLt, as the plugins' cublaslt variants run them (so its handle
// has loaded what a prompt GEMM needs).
void run_cublaslt() {
  cublasLtHandle_t lt;
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) std::exit(1);
  const int m = 256, n = 256, k = 256;
  __nv_bfloat16 *a, *b;
  float* c;
  check(cudaMalloc(&a, m * k * 2), "cudaMalloc");
  check(cudaMalloc(&b, k * n * 2), "cudaMalloc");
  check(cudaMalloc(&c, m * n * 4), "cudaMalloc");
  cublasLtMatmulDesc_t op;
  cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, m, k, m);
  cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, n, k);
  cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, m);
  const float one = 1, zero = 0;
  if (cublasLtMatmul(lt, op, &one, a, la, b, lb, &zero, c, lc, c, lc, nullptr, nullptr, 0, nullptr) !=
      CUBLAS_STATUS_SUCCESS)
    std::fprintf(stderr, "cublasLtMatmul failed (the handle still counts)\n");
  check(cudaDeviceSynchronize(), "cublasLtMatmul");
  check(cudaFree(a), "cudaFree");
  check(cudaFree(b), "cudaFree");
  check(cudaFree(c), "cudaFree");
  // The handle stays: a backend keeps its own for its lifetime.
}

void malloc_granule(size_t bytes, int count) {
  std::vector<void*> bufs(count);
  const size_t before = free_bytes();
  for (void*& p : bufs) check(cudaMalloc(&p, bytes), "cudaMalloc");
  const double per = double(before - free_bytes()) / count;
  std::printf("cudaMalloc %9zu B x %3d: %10.0f B each on the device (+%.0f B, %.1f%%)\n", bytes, count, per,
              per - double(bytes), 100.0 * (per - double(bytes)) / double(bytes));
  for (void* p : bufs) check(cudaFree(p), "cudaFree");
}

void graph_bytes(int launches, int graphs) {
  float* buf;
  check(cudaMalloc(&buf, 1 << 20), "cudaMalloc");
  cudaStream_t s;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  std::vector<cudaGraphExec_t> execs(graphs);
  const size_t before = free_bytes();
  for (cudaGraphExec_t& e : execs) {
    check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "begin capture");
    for (int i = 0; i < launches; ++i) touch<<<64, 256, 0, s>>>(buf, 1 << 18, 1.0f, 0.5f, 0.25f, 0.125f);
    cudaGraph_t g;
    check(cudaStreamEndCapture(s, &g), "end capture");
    check(cudaGraphInstantiate(&e, g, 0), "instantiate");
    check(cudaGraphDestroy(g), "graph destroy");
    check(cudaGraphLaunch(e, s), "graph launch"); // a replayed recording, as the decoder's
  }
  check(cudaStreamSynchronize(s), "replay");
  const double per = double(before - free_bytes()) / graphs;
  std::printf("graph of %5d launches x %3d: %10.0f B each on the device (%.0f B per launch)\n", launches, graphs, per,
              per / launches);
  for (cudaGraphExec_t e : execs) cudaGraphExecDestroy(e);
  cudaStreamDestroy(s);
  cudaFree(buf);
}

} // namespace

int main() {
  check(cudaFree(nullptr), "context");
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("%s: total %.1f MiB, context %.1f MiB\n", prop.name, mib(total), mib(total - free));
  run_cublaslt();
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  std::printf("context and cuBLASLt after one bf16 product: %.1f MiB\n", mib(total - free));
  for (size_t bytes : {size_t{4} << 10, size_t{100} << 10, size_t{600} << 10, size_t{1} << 20,
                       size_t{1536} << 10, size_t{2} << 20, size_t{2560} << 10, size_t{17} << 20, size_t{100} << 20})
    malloc_granule(bytes, bytes >= (size_t{17} << 20) ? 20 : 100);
  for (int launches : {100, 700, 2000}) graph_bytes(launches, 10);
  return 0;
}
