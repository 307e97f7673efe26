// gemv-probe: how fast can one-token GEMV designs stream a decode step's weight matrices, in a
// chain of dependent launches the way a CUDA-graph decode step runs them?
//
// For each (in_features K, out_features N) it builds one CUDA graph of `layers` launches, each on
// its own copy of W (so nothing is served from L2 across launches), launched with programmatic
// stream serialization like the plugins' kernels, and reports the median microseconds per launch
// and the fraction of the measured device-to-device copy rate. Designs:
//   base      the plugins' linear/gemv_warp_t1 kernel itself (plugins/cuda/kernels/linear/gemv_warp_template.cuh, t128 r2 v8)
//   s<T>_r<R>_u<U>_k<S>   T threads per CTA; each group of S warps owns R rows and splits the
//             reduction S ways (partial sums added in shared memory, in a fixed order); each lane
//             keeps R x U 16-byte loads in flight before it uses any
//   cublas    cublasGemmEx, bf16 x and W, float32 y (what linear/cublaslt runs)
//   p<C>_<T>_r<R>_u<U>_k<S>, e<C>_...   the one-wave pipelined walk (what the plugins' gemv_4warps_one_wave
//             runs, row_pair_pipe.cuh): at most C CTAs per SM walking row blocks, the next batch
//             of loads in flight while the current one is used; e: the first batch issued
//             before the launch wait
// Every design's y is checked against `base` (relative L2 error), so a fast wrong kernel shows.
// CHAIN=1 instead times whole Qwen3-8B layers (q|k|v, o, gate|up, down, each its own copy of W)
// in one graph, with one design per projection: kernels behave differently behind a launch of
// another kind than behind their own.
//
// Built with the cuda-sm90 plugin (bin/gemv-probe, never installed), or alone with the CUDA toolkit:
//   nvcc -O3 -std=c++17 -arch=sm_90a -o gemv-probe gemv_probe.cu -lcublas
// Run: [CHAIN=1] gemv-probe [layers]; PREFETCH_BYTES=N sets the split designs' L2 prefetch before the
// launch wait (default 4096 bytes of each warp's slice of its rows; 0: none).
// On the H200 it found (docs/performance.md "Decode GEMVs"): splitting each row's reduction across
// warps lifts the short matrices most (the 8B's o_proj 56% -> 81% of the copy rate, its down
// 61% -> 94%, the 27B's o/out_proj 61% -> 91%; 85-104% on every shape against 63-100% for
// cuBLAS); in a chain of GEMVs an L2 prefetch before the launch wait costs time; with CHAIN=1 the
// whole-row and split routes took 117.7 us per 8B layer (77%), the one-wave walk 97.3 us (94%).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../../plugins/cuda/kernels/linear/gemv_warp_template.cuh"

#define CHECK(x)                                                                                      \
  do {                                                                                                \
    cudaError_t e_ = (x);                                                                             \
    if (e_ != cudaSuccess) {                                                                          \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));         \
      std::exit(1);                                                                                   \
    }                                                                                                 \
  } while (0)

namespace {

__device__ __forceinline__ void launch_wait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

__global__ void __launch_bounds__(128) base_kernel(const float* x, const void* w, float* y, int K, int N) {
  ninfer_jit::prefetch_rows<ninfer_jit::Bf16, 128, 2>(w, K, N, 4096);
  launch_wait();
  ninfer_jit::gemv<ninfer_jit::Bf16, 128, 2, 8, 1>(x, K, w, y, N, K, N, 0, 1, 0);
}

// acc[r] += the dot products of one batch: vectors s0, s0 + 32, ... (U of them, those below s_end)
// of R bf16 rows (wv[u][r]) with float32 x.
template <int R, int U>
__device__ __forceinline__ void dot_batch(const float* __restrict__ x, const uint4 (&wv)[U][R], int s0, int s_end,
                                          float (&acc)[R]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int s = s0 + 32 * u;
    if (s >= s_end) break;
    const float4 x0 = __ldg(reinterpret_cast<const float4*>(x) + 2 * s);
    const float4 x1 = __ldg(reinterpret_cast<const float4*>(x) + 2 * s + 1);
    const float xs[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const unsigned int ws[4] = {wv[u][r].x, wv[u][r].y, wv[u][r].z, wv[u][r].w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        acc[r] = fmaf(xs[2 * i], __uint_as_float(ws[i] << 16), acc[r]);
        acc[r] = fmaf(xs[2 * i + 1], __uint_as_float(ws[i] & 0xffff0000u), acc[r]);
      }
    }
  }
}

// The warp's R sums (over its lanes, then over the S slices of its group through `part` in slice
// order) stored as outputs n0.. of y. Every thread of the CTA calls it.
template <int R, int S, int kWarps>
__device__ __forceinline__ void store_rows(float (&acc)[R], float (&part)[kWarps][R], float* y, long long n0, int N) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = ninfer_jit::warp_sum(acc[r]);
  if constexpr (S == 1) {
    if (lane == 0)
#pragma unroll
      for (int r = 0; r < R; ++r)
        if (n0 + r < N) y[n0 + r] = acc[r];
  } else {
    if (lane == 0)
#pragma unroll
      for (int r = 0; r < R; ++r) part[warp][r] = acc[r];
    __syncthreads();
    if (warp % S == 0 && lane < R && n0 + lane < N) {
      float v = 0.f;
#pragma unroll
      for (int j = 0; j < S; ++j) v += part[warp + j][lane];
      y[n0 + lane] = v;
    }
  }
}

// The split design. Warp w of the CTA is in row group w / S and reduction slice w % S.
template <int T, int R, int U, int S>
__global__ void __launch_bounds__(T) split_kernel(const float* __restrict__ x, const unsigned short* __restrict__ w,
                                                  float* __restrict__ y, int K, int N, int prefetch_bytes) {
  constexpr int kWarps = T / 32, kGroups = kWarps / S;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int group = warp / S, slice = warp % S;
  const long long n0 = (static_cast<long long>(blockIdx.x) * kGroups + group) * R;
  const int steps = K / 8; // 16-byte vectors per row
  const int per_slice = (steps + S - 1) / S;
  const int s_begin = slice * per_slice, s_end = min(steps, s_begin + per_slice);
  const unsigned short* rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) rows[r] = w + min(n0 + r, static_cast<long long>(N) - 1) * K;
  // Prefetch this warp's slice of its rows (weights are never written during a step).
  const int pf_vec = min(s_end - s_begin, prefetch_bytes / 16);
#pragma unroll
  for (int r = 0; r < R; ++r)
    for (int s = s_begin + lane * 8; s < s_begin + pf_vec; s += 32 * 8)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(rows[r] + static_cast<long long>(s) * 8));
  launch_wait();

  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;
  for (int s0 = s_begin + lane; s0 < s_end; s0 += 32 * U) {
    uint4 wv[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int s = s0 + 32 * u;
        wv[u][r] = s < s_end ? __ldg(reinterpret_cast<const uint4*>(rows[r]) + s) : make_uint4(0, 0, 0, 0);
      }
    dot_batch<R, U>(x, wv, s0, s_end, acc);
  }
  __shared__ float part[kWarps][R];
  store_rows<R, S>(acc, part, y, n0, N);
}

// The pipelined design: a grid of at most `per_sm` CTAs per SM that walk their row blocks in turn
// (block b, b + grid, ...), each lane keeping two batches of R x U 16-byte loads in flight (the
// next batch is issued before the current one is used, across row blocks too). kEarly: the first
// batch is issued before the launch wait (weights are never written by a step), so it overlaps
// the previous kernel's tail when this kernel's CTAs are resident early. Fewer CTAs per SM leave
// room for the next kernel's CTAs to become resident while this one still streams.
template <int T, int R, int U, int S, bool kEarly>
__global__ void __launch_bounds__(T) pipe_kernel(const float* __restrict__ x, const unsigned short* __restrict__ w,
                                                 float* __restrict__ y, int K, int N) {
  constexpr int kWarps = T / 32, kGroups = kWarps / S, kRowsPerCta = kGroups * R;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int group = warp / S, slice = warp % S;
  const int steps = K / 8;
  const int per_slice = (steps + S - 1) / S;
  const int s_begin = min(steps, slice * per_slice), s_end = min(steps, s_begin + per_slice);
  const int blocks = (N + kRowsPerCta - 1) / kRowsPerCta;
  const auto first_row = [&](int b) { return (static_cast<long long>(b) * kGroups + group) * R; };
  uint4 wv[U][R];
  const auto load = [&](long long n0, int s0) {
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int s = s0 + 32 * u;
        const unsigned short* row = w + min(n0 + r, static_cast<long long>(N) - 1) * K;
        wv[u][r] = s < s_end ? __ldg(reinterpret_cast<const uint4*>(row) + s) : make_uint4(0, 0, 0, 0);
      }
  };
  int b = blockIdx.x;
  if (kEarly && b < blocks) load(first_row(b), s_begin + lane);
  launch_wait();
  if (!kEarly && b < blocks) load(first_row(b), s_begin + lane);
  __shared__ float part[kWarps][R];
  for (; b < blocks; b += gridDim.x) {
    const long long n0 = first_row(b);
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.f;
    for (int s0 = s_begin + lane; s0 < s_end; s0 += 32 * U) {
      uint4 cur[U][R];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int r = 0; r < R; ++r) cur[u][r] = wv[u][r];
      if (s0 + 32 * U < s_end) load(n0, s0 + 32 * U);
      else if (b + static_cast<int>(gridDim.x) < blocks) load(first_row(b + gridDim.x), s_begin + lane);
      dot_batch<R, U>(x, cur, s0, s_end, acc);
    }
    store_rows<R, S>(acc, part, y, n0, N);
    __syncthreads(); // part is rewritten for the next block
  }
}

struct Design {
  std::string name;
  // Enqueues one launch on `stream`.
  void (*launch)(const float* x, const void* w, float* y, int K, int N, cudaStream_t s, const Design& d);
  const void* kernel = nullptr;
  int threads = 0, rows_per_cta = 0, per_sm = 0; // per_sm: the pipelined designs' CTAs per SM
};

void launch_pdl(const void* kernel, dim3 grid, dim3 block, void** params, cudaStream_t s) {
  cudaLaunchConfig_t c{};
  c.gridDim = grid;
  c.blockDim = block;
  c.stream = s;
  cudaLaunchAttribute a[1];
  a[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a[0].val.programmaticStreamSerializationAllowed = 1;
  c.attrs = a;
  c.numAttrs = 1;
  CHECK(cudaLaunchKernelExC(&c, kernel, params));
}

void launch_base(const float* x, const void* w, float* y, int K, int N, cudaStream_t s, const Design&) {
  void* p[] = {&x, &w, &y, &K, &N};
  launch_pdl(reinterpret_cast<const void*>(base_kernel), dim3((N + 7) / 8), dim3(128), p, s);
}

int g_prefetch_bytes = 4096;

void launch_split(const float* x, const void* w, float* y, int K, int N, cudaStream_t s, const Design& d) {
  int pf = g_prefetch_bytes;
  void* p[] = {&x, &w, &y, &K, &N, &pf};
  launch_pdl(d.kernel, dim3((N + d.rows_per_cta - 1) / d.rows_per_cta), dim3(d.threads), p, s);
}

int g_sms = 0;

void launch_pipe(const float* x, const void* w, float* y, int K, int N, cudaStream_t s, const Design& d) {
  void* p[] = {&x, &w, &y, &K, &N};
  const int blocks = (N + d.rows_per_cta - 1) / d.rows_per_cta;
  launch_pdl(d.kernel, dim3(std::min(blocks, g_sms * d.per_sm)), dim3(d.threads), p, s);
}

template <int T, int R, int U, int S, bool kEarly>
Design pipe_design(int per_sm) {
  Design d;
  d.name = std::string(kEarly ? "e" : "p") + std::to_string(per_sm) + "_" + std::to_string(T) + "_r" +
           std::to_string(R) + "_u" + std::to_string(U) + "_k" + std::to_string(S);
  d.launch = launch_pipe;
  d.kernel = reinterpret_cast<const void*>(pipe_kernel<T, R, U, S, kEarly>);
  d.threads = T;
  d.rows_per_cta = T / 32 / S * R;
  d.per_sm = per_sm;
  return d;
}

template <int T, int R, int U, int S>
Design split_design() {
  Design d;
  d.name = "s" + std::to_string(T) + "_r" + std::to_string(R) + "_u" + std::to_string(U) + "_k" + std::to_string(S);
  d.launch = launch_split;
  d.kernel = reinterpret_cast<const void*>(split_kernel<T, R, U, S>);
  d.threads = T;
  d.rows_per_cta = T / 32 / S * R;
  return d;
}

cublasHandle_t g_cublas;
__nv_bfloat16* g_xb = nullptr;

void launch_cublas(const float*, const void* w, float* y, int K, int N, cudaStream_t s, const Design&) {
  const float one = 1.f, zero = 0.f;
  cublasSetStream(g_cublas, s);
  // y^T (N x 1) = W (N x K, row-major = K x N column-major, transposed) * x (K x 1)
  if (cublasGemmEx(g_cublas, CUBLAS_OP_T, CUBLAS_OP_N, N, 1, K, &one, w, CUDA_R_16BF, K, g_xb, CUDA_R_16BF, K, &zero, y,
                   CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublasGemmEx failed\n");
    std::exit(1);
  }
}

__global__ void fill_bf16(unsigned short* w, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    const float f = (static_cast<int>(h & 0xffff) - 32768) / 32768.f * 0.05f;
    w[i] = static_cast<unsigned short>(__float_as_uint(f) >> 16);
  }
}

double copy_rate(size_t bytes) {
  void *a, *b;
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&b, bytes));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < 6; ++i) {
    CHECK(cudaEventRecord(e0));
    CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float m;
    CHECK(cudaEventElapsedTime(&m, e0, e1));
    if (i) ms.push_back(m);
  }
  std::sort(ms.begin(), ms.end());
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  return 2.0 * bytes / (ms[ms.size() / 2] * 1e-3); // read + write
}

// Milliseconds of `times` replays of `graph` after one warm-up replay, sorted.
std::vector<float> replay_ms(cudaGraph_t graph, cudaStream_t stream, int times) {
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i <= times; ++i) {
    CHECK(cudaEventRecord(e0, stream));
    CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaEventRecord(e1, stream));
    CHECK(cudaEventSynchronize(e1));
    float m;
    CHECK(cudaEventElapsedTime(&m, e0, e1));
    if (i) ms.push_back(m);
  }
  std::sort(ms.begin(), ms.end());
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  return ms;
}

} // namespace

int main(int argc, char** argv) {
  const int layers = argc > 1 ? std::atoi(argv[1]) : 32;
  if (const char* pf = std::getenv("PREFETCH_BYTES")) g_prefetch_bytes = std::atoi(pf);
  const double rate = copy_rate(size_t(1) << 30);
  std::printf("copy rate %.0f GB/s, %d launches per graph, prefetch %d bytes per warp row\n", rate / 1e9, layers,
              g_prefetch_bytes);
  cublasCreate(&g_cublas);
  void* ws;
  CHECK(cudaMalloc(&ws, 32 << 20));
  cublasSetWorkspace(g_cublas, ws, 32 << 20);

  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  g_sms = prop.multiProcessorCount;

  std::vector<Design> designs;
  designs.push_back({"base", launch_base});
  designs.push_back(split_design<128, 2, 2, 1>());
  designs.push_back(split_design<128, 2, 4, 1>());
  designs.push_back(split_design<128, 1, 8, 1>());
  designs.push_back(split_design<128, 4, 2, 1>());
  designs.push_back(split_design<256, 2, 2, 2>());
  designs.push_back(split_design<256, 2, 4, 2>());
  designs.push_back(split_design<256, 2, 2, 4>());
  designs.push_back(split_design<256, 4, 2, 4>());
  designs.push_back(split_design<256, 2, 2, 8>());
  designs.push_back(split_design<256, 4, 1, 8>());
  designs.push_back(split_design<256, 4, 2, 8>());
  designs.push_back(split_design<512, 4, 2, 8>());
  designs.push_back(split_design<512, 8, 1, 16>());
  designs.push_back({"cublas", launch_cublas});
  designs.push_back(pipe_design<256, 2, 2, 4, false>(5));
  designs.push_back(pipe_design<256, 2, 2, 4, true>(5));
  designs.push_back(pipe_design<256, 2, 2, 4, true>(3));
  designs.push_back(pipe_design<256, 2, 2, 4, true>(2));
  designs.push_back(pipe_design<256, 2, 4, 4, true>(2));
  designs.push_back(pipe_design<256, 2, 2, 4, false>(2));
  designs.push_back(pipe_design<128, 2, 2, 1, true>(8));
  designs.push_back(pipe_design<128, 2, 2, 1, true>(4));
  designs.push_back(pipe_design<128, 2, 4, 1, true>(4));
  const auto named = [&](const std::string& n) -> const Design& {
    for (const auto& d : designs)
      if (d.name == n) return d;
    std::fprintf(stderr, "no design %s\n", n.c_str());
    std::exit(1);
  };
  // CHAIN=1: whole Qwen3-8B layers' projections (q|k|v, o, gate|up, down) in one graph of `layers`
  // layers, each matrix its own copy, with one design per projection: how the designs behave
  // next to each other, not only behind themselves.
  if (const char* c = std::getenv("CHAIN"); c && *c == '1') {
    const int ks[4][2] = {{4096, 6144}, {4096, 4096}, {4096, 24576}, {12288, 4096}};
    double bytes = 0;
    for (const auto& k : ks) bytes += 2.0 * k[0] * k[1];
    std::vector<unsigned short*> w(size_t(4) * layers);
    for (int l = 0; l < layers; ++l)
      for (int j = 0; j < 4; ++j) {
        const size_t wn = size_t(ks[j][0]) * ks[j][1];
        CHECK(cudaMalloc(&w[l * 4 + j], wn * 2));
        fill_bf16<<<1024, 256>>>(w[l * 4 + j], wn, 977u * l + 13u * j + 5u);
      }
    float *x, *y;
    CHECK(cudaMalloc(&x, 12288 * 4));
    CHECK(cudaMemset(x, 0, 12288 * 4));
    CHECK(cudaMalloc(&y, 24576 * 4));
    CHECK(cudaMalloc(&g_xb, 12288 * 2));
    CHECK(cudaMemset(g_xb, 0, 12288 * 2));
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const std::vector<std::vector<std::string>> chains = {
        {"s128_r2_u2_k1", "s256_r2_u2_k4", "s128_r2_u2_k1", "s256_r2_u2_k4"}, // the plugins' routes today
        {"s256_r2_u2_k4", "s256_r2_u2_k4", "s256_r2_u2_k4", "s256_r2_u2_k4"},
        {"s128_r2_u2_k1", "s128_r2_u2_k1", "s128_r2_u2_k1", "s128_r2_u2_k1"},
        {"cublas", "cublas", "cublas", "cublas"},
        {"p5_256_r2_u2_k4", "p5_256_r2_u2_k4", "p5_256_r2_u2_k4", "p5_256_r2_u2_k4"},
        {"e5_256_r2_u2_k4", "e5_256_r2_u2_k4", "e5_256_r2_u2_k4", "e5_256_r2_u2_k4"},
        {"e3_256_r2_u2_k4", "e3_256_r2_u2_k4", "e3_256_r2_u2_k4", "e3_256_r2_u2_k4"},
        {"e2_256_r2_u2_k4", "e2_256_r2_u2_k4", "e2_256_r2_u2_k4", "e2_256_r2_u2_k4"},
        {"e2_256_r2_u4_k4", "e2_256_r2_u4_k4", "e2_256_r2_u4_k4", "e2_256_r2_u4_k4"},
        {"p2_256_r2_u2_k4", "p2_256_r2_u2_k4", "p2_256_r2_u2_k4", "p2_256_r2_u2_k4"},
        {"e8_128_r2_u2_k1", "e8_128_r2_u2_k1", "e8_128_r2_u2_k1", "e8_128_r2_u2_k1"},
        {"e4_128_r2_u2_k1", "e4_128_r2_u2_k1", "e4_128_r2_u2_k1", "e4_128_r2_u2_k1"},
        {"e4_128_r2_u4_k1", "e4_128_r2_u4_k1", "e4_128_r2_u4_k1", "e4_128_r2_u4_k1"},
        {"e4_128_r2_u2_k1", "e2_256_r2_u2_k4", "e4_128_r2_u2_k1", "e2_256_r2_u2_k4"},
        {"s128_r2_u2_k1", "e2_256_r2_u2_k4", "s128_r2_u2_k1", "e2_256_r2_u2_k4"},
    };
    std::printf("Qwen3-8B projections, %d layers per graph, %.1f MB per layer; us per layer and %% of the copy rate\n",
                layers, bytes / 1e6);
    for (const auto& chain : chains) {
      cudaGraph_t graph;
      CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
      for (int l = 0; l < layers; ++l)
        for (int j = 0; j < 4; ++j) {
          const Design& d = named(chain[j]);
          d.launch(x, w[l * 4 + j], y, ks[j][0], ks[j][1], stream, d);
        }
      CHECK(cudaStreamEndCapture(stream, &graph));
      const std::vector<float> ms = replay_ms(graph, stream, 8);
      const double us = ms[ms.size() / 2] * 1e3 / layers;
      std::printf("%-62s %7.1f us %4.1f%%  (spread %.1f-%.1f)\n",
                  (chain[0] + " " + chain[1] + " " + chain[2] + " " + chain[3]).c_str(), us,
                  100 * bytes / (us * 1e-6) / rate, ms.front() * 1e3 / layers, ms.back() * 1e3 / layers);
      std::fflush(stdout);
      CHECK(cudaGraphDestroy(graph));
    }
    return 0;
  }

  const int shapes[][2] = {{4096, 6144}, {4096, 4096}, {4096, 24576}, {12288, 4096}, // Qwen3-8B
                           {5120, 14336}, {6144, 5120}, {5120, 16480}, {5120, 34816}, {17408, 5120}}; // 27B
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::printf("%-16s", "K x N");
  for (const auto& d : designs) std::printf(" %14s", d.name.c_str());
  std::printf("\n");
  for (const auto& sh : shapes) {
    const int K = sh[0], N = sh[1];
    const size_t wn = size_t(K) * N;
    std::vector<unsigned short*> w(layers);
    for (int l = 0; l < layers; ++l) {
      CHECK(cudaMalloc(&w[l], wn * 2));
      fill_bf16<<<1024, 256>>>(w[l], wn, 977u * l + 13u);
    }
    float *x, *y, *yref;
    CHECK(cudaMalloc(&x, K * 4));
    CHECK(cudaMalloc(&y, size_t(N) * layers * 4));
    CHECK(cudaMalloc(&yref, size_t(N) * 4));
    CHECK(cudaMalloc(&g_xb, K * 2));
    std::vector<float> hx(K);
    std::vector<__nv_bfloat16> hxb(K);
    for (int k = 0; k < K; ++k) {
      hxb[k] = __float2bfloat16(std::sin(0.37f * k) + 0.1f);
      hx[k] = __bfloat162float(hxb[k]); // the same x for every design, cuBLAS's bf16 included
    }
    CHECK(cudaMemcpy(x, hx.data(), K * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(g_xb, hxb.data(), K * 2, cudaMemcpyHostToDevice));
    std::vector<float> ref(N), got(N);
    std::string errors;
    std::printf("%6d x %-7d", K, N);
    for (const auto& d : designs) {
      // Correctness on launch 0, then the timed graph.
      d.launch(x, w[0], yref, K, N, stream, d);
      CHECK(cudaStreamSynchronize(stream));
      CHECK(cudaMemcpy(d.name == "base" ? ref.data() : got.data(), yref, N * 4, cudaMemcpyDeviceToHost));
      if (d.name != "base") {
        double num = 0, den = 0;
        for (int n = 0; n < N; ++n) num += (got[n] - ref[n]) * double(got[n] - ref[n]), den += ref[n] * double(ref[n]);
        const double rel = std::sqrt(num / den);
        if (rel > 1e-5) errors += " " + d.name + " rel-l2 " + std::to_string(rel);
      }
      cudaGraph_t graph;
      CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
      for (int l = 0; l < layers; ++l) d.launch(x, w[l], y + size_t(N) * l, K, N, stream, d);
      CHECK(cudaStreamEndCapture(stream, &graph));
      const std::vector<float> ms = replay_ms(graph, stream, 6);
      const double us = ms[ms.size() / 2] * 1e3 / layers;
      const double frac = wn * 2.0 / (us * 1e-6) / rate;
      std::printf(" %6.1f us %3.0f%%", us, 100 * frac);
      std::fflush(stdout);
      CHECK(cudaGraphDestroy(graph));
    }
    std::printf("\n");
    if (!errors.empty()) std::printf("  WRONG:%s\n", errors.c_str());
    for (auto p : w) CHECK(cudaFree(p));
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
    CHECK(cudaFree(yref));
    CHECK(cudaFree(g_xb));
  }
  return 0;
}
