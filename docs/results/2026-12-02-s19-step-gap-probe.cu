// Probe: how long the GPU idles between host-driven decode steps (not part of the tree).
#include <cstdio>
#include <chrono>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)
__global__ void spin(long long cycles, int* in, int* out) {
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {}
  if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = in[0] + 1;
}
__global__ void small(int* a) { if (threadIdx.x == 0) a[blockIdx.x] += 1; }
int main() {
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int *din, *dout, *hin, *hout;
  CK(cudaMalloc(&din, 64)); CK(cudaMalloc(&dout, 64));
  CK(cudaHostAlloc(&hin, 64, 0)); CK(cudaHostAlloc(&hout, 64, 0));
  int clk = 0; CK(cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0));
  const long long cycles = (long long)clk * 1000LL * 4 / 1000; // ~4 ms at the reported clock
  // layers graph: 36 spin kernels of 1/36 each
  cudaGraph_t g; cudaGraphExec_t layers, whole;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < 36; ++i) spin<<<132, 128, 0, s>>>(cycles / 36, din, dout);
  CK(cudaStreamEndCapture(s, &g)); CK(cudaGraphInstantiate(&layers, g, 0));
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  CK(cudaMemcpyAsync(din, hin, 20, cudaMemcpyHostToDevice, s));
  for (int i = 0; i < 36; ++i) spin<<<132, 128, 0, s>>>(cycles / 36, din, dout);
  small<<<132, 128, 0, s>>>(dout); small<<<1, 256, 0, s>>>(dout);
  CK(cudaMemcpyAsync(hout, dout, 8, cudaMemcpyDeviceToHost, s));
  CK(cudaStreamEndCapture(s, &g)); CK(cudaGraphInstantiate(&whole, g, 0));
  const int N = 200;
  auto run = [&](int mode) {
    for (int w = 0; w < 2; ++w) {
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < N; ++i) {
        if (mode == 0) { cudaGraphLaunch(layers, s); small<<<132, 128, 0, s>>>(dout); small<<<1, 256, 0, s>>>(dout); }
        if (mode == 1) {
          hin[0] = i; cudaMemcpyAsync(din, hin, 20, cudaMemcpyHostToDevice, s);
          cudaGraphLaunch(layers, s); small<<<132, 128, 0, s>>>(dout); small<<<1, 256, 0, s>>>(dout);
          cudaMemcpyAsync(hout, dout, 8, cudaMemcpyDeviceToHost, s); cudaStreamSynchronize(s);
        }
        if (mode == 3) {
          hin[0] = i; cudaMemcpyAsync(din, hin, 20, cudaMemcpyHostToDevice, s); cudaStreamSynchronize(s);
          cudaGraphLaunch(layers, s); small<<<132, 128, 0, s>>>(dout); small<<<1, 256, 0, s>>>(dout);
          cudaMemcpyAsync(hout, dout, 8, cudaMemcpyDeviceToHost, s); cudaStreamSynchronize(s);
        }
        if (mode == 2) { hin[0] = i; cudaGraphLaunch(whole, s); cudaStreamSynchronize(s); }
      }
      cudaStreamSynchronize(s);
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / N;
      if (w) printf("mode %d (%s): %.1f us per step\n", mode, mode == 0 ? "back to back, no host wait" : mode == 1 ? "async upload + graph + 2 eager + download + sync" : mode == 3 ? "upload+sync + graph + 2 eager + download + sync (today)" : "one graph with copies + sync", us);
    }
  };
  for (int k = 0; k < 2; ++k) { run(0); run(3); run(1); run(2); }
  return 0;
}
