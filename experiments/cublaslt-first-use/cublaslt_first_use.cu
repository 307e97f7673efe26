// The question: where does a prompt chunk of a token count met for the first time spend its host
// time on cuBLASLt? `ninfer-serve -v` on an H100 (Qwen3-8B shape) showed a 101-token chunk
// taking 20 ms to queue, 19 of them in linear and norm_linear, against about 3 ms for a
// 2,048-token chunk of a count met before, and a 36-token chunk 127 ms. This program times,
// for Qwen3-8B's four projection shapes (bf16 weights, float32 output, the `cublaslt`
// variant's descriptors), first at 2,048 and 1,856 rows (what a server met earlier), then at
// new counts: the heuristic query, cublasLtMatmulAlgoCheck of the same pick, and the first and
// second cublasLtMatmul (host time to return, and to completion).
//
// Build: with the tree (bin/cublaslt-first-use), or
//   nvcc -O2 -arch=sm_90 -o cublaslt-first-use cublaslt_first_use.cu -lcublasLt
// Run: cublaslt-first-use; CUDA_MODULE_LOADING=EAGER cublaslt-first-use for the same without
// lazy module loading. Not yet run on a GPU. (The 101 rows twice: the second is a count met.)
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

struct Shape {
  int K, N;
  const char* name;
};
constexpr Shape kShapes[] = {{4096, 6144, "qkv"}, {4096, 4096, "o"}, {4096, 24576, "gate_up"}, {12288, 4096, "down"}};
constexpr size_t kWorkspace = 32u << 20; // the variant's (kCublasLtWorkspaceBytes)

struct Buffers {
  cublasLtHandle_t h = nullptr;
  void *w = nullptr, *x = nullptr, *y = nullptr, *ws = nullptr;
};

void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(rc));
    std::exit(1);
  }
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "%s: %s\n", what, cublasLtGetStatusString(s));
    std::exit(1);
  }
}

// y[rows, N] = x[rows, K] . W[N, K]^T as the variant describes it (column-major D = N x rows).
void time_one(const Buffers& b, const Shape& s, long rows, const char* tag) {
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulPreference_t pref;
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  check(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
  check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa");
  check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb");
  check(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, s.K, s.N, s.K), "layout a");
  check(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, s.K, rows, s.K), "layout b");
  check(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, s.N, rows, s.N), "layout c");
  check(cublasLtMatmulPreferenceCreate(&pref), "pref");
  check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspace,
                                             sizeof kWorkspace),
        "workspace");
  cublasLtMatmulHeuristicResult_t r{};
  int found = 0;
  auto t = Clock::now();
  check(cublasLtMatmulAlgoGetHeuristic(b.h, op, la, lb, lc, lc, pref, 1, &r, &found), "heuristic");
  const double heuristic = ms_since(t);
  if (!found) std::exit(1);
  cublasLtMatmulHeuristicResult_t checked{};
  t = Clock::now();
  check(cublasLtMatmulAlgoCheck(b.h, op, la, lb, lc, lc, &r.algo, &checked), "check");
  const double algo_check = ms_since(t);
  const float one = 1, zero = 0;
  double launch[2], done[2];
  for (int i = 0; i < 2; ++i) {
    check(cudaDeviceSynchronize(), "sync");
    t = Clock::now();
    check(cublasLtMatmul(b.h, op, &one, b.w, la, b.x, lb, &zero, b.y, lc, b.y, lc, &r.algo, b.ws, kWorkspace, nullptr),
          "matmul");
    launch[i] = ms_since(t);
    check(cudaDeviceSynchronize(), "sync");
    done[i] = ms_since(t);
  }
  int algo_id = 0, tile = 0;
  size_t n = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&r.algo, CUBLASLT_ALGO_CONFIG_ID, &algo_id, sizeof algo_id, &n);
  cublasLtMatmulAlgoConfigGetAttribute(&r.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &n);
  std::printf("%-5s %-8s rows %5ld  heuristic %7.3f ms  check %6.3f  first %7.3f (done %7.3f)  second %6.3f "
              "(done %6.3f)  algo %d tile %d\n",
              tag, s.name, rows, heuristic, algo_check, launch[0], done[0], launch[1], done[1], algo_id, tile);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatmulDescDestroy(op);
}

} // namespace

int main() {
  Buffers b;
  check(cudaFree(nullptr), "context");
  check(cublasLtCreate(&b.h), "handle");
  check(cudaMalloc(&b.w, size_t{12288} * 24576 * 2), "w");
  check(cudaMalloc(&b.x, size_t{2048} * 12288 * 2), "x");
  check(cudaMalloc(&b.y, size_t{2048} * 24576 * 4), "y");
  check(cudaMalloc(&b.ws, kWorkspace), "workspace");
  for (long rows : {2048L, 1856L})
    for (const Shape& s : kShapes) time_one(b, s, rows, "met");
  for (long rows : {36L, 101L, 104L, 112L, 128L, 93L, 101L})
    for (const Shape& s : kShapes) time_one(b, s, rows, "new");
  return 0;
}
