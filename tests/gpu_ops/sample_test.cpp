// The sample op on the GPU chooses exactly the CPU reference's ids (the contract's weights are
// exact 64-bit fixed point, so any summation order gives the same sums), on Qwen-sized rows
// with ties, -inf entries, invalid rows and every filter combination. The CPU reference is
// checked against a float64 oracle of the distribution in tests/ops/sample_test.cpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "ninfer/abi/ops/argmax.h"
#include "ninfer/abi/ops/sample.h"
#include "ninfer/planning/planner.hpp"
#include "gpu_op_env.hpp"
#include "op_routes.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The log-probability is a float32 log-sum-exp on the GPU (double on the CPU).
constexpr Tolerance kSampleLogprob{"sample logprob (float32 log-sum-exp)", 1e-4, 1e-5};

struct Result {
  std::vector<int32_t> ids;
  std::vector<float> logprob;
};

// On the CPU reference (device false) or on the CUDA backend by `route` (op_routes.hpp).
Result run_on(Backend& be, const std::vector<float>& logits, int64_t stride, const std::vector<ninfer_sample_row>& ps,
              int32_t vocab, bool device, const std::string& route = "") {
  const int64_t rows = static_cast<int64_t>(ps.size());
  const ninfer_shape s{rows, {vocab, 0, 0, 0}, NINFER_DTYPE_F32};
  Result r{std::vector<int32_t>(rows, -7), std::vector<float>(rows, std::nanf(""))};
  if (!device) {
    ninfer_sample_args a{logits.data(), stride, ps.data(), r.ids.data(), r.logprob.data(), rows, vocab};
    be.run(NINFER_OP_SAMPLE, s, &a);
    return r;
  }
  DeviceBuffer dl = put(be, logits), dp = put(be, ps), di = put(be, std::vector<int32_t>(rows, -7)),
               dlp = poisoned_buffer(be, rows);
  ninfer_sample_args a{dl.as<float>(), stride, dp.as<ninfer_sample_row>(), di.as<int32_t>(), dlp.as<float>(), rows,
                       vocab};
  be.reserve_workspace(NINFER_OP_SAMPLE, s); // the planner's route may be topk_split (a workspace)
  run_route(be, NINFER_OP_SAMPLE, route, s, &a);
  r.ids = get<int32_t>(be, di, rows);
  r.logprob = get<float>(be, dlp, rows);
  return r;
}

ninfer_sample_row random_params(std::mt19937_64& rng, int32_t vocab) {
  // 5e-324 and 1e-310: below NINFER_SAMPLE_MIN_TEMPERATURE, greedy (1 / T would overflow).
  const double temps[] = {0.0, 0.3, 0.7, 1.0, 1.5, 5e-324, 1e-310};
  const int32_t ks[] = {0, 0, 1, 20, 50, 64, 65, 1000, vocab}; // topk_split takes 1..64
  const double ps[] = {1.0, 1.0, 0.95, 0.8, 0.5, 1e-6};
  const double mins[] = {0.0, 0.0, 0.05, 0.3};
  auto pick = [&](auto& arr) { return arr[rng() % (sizeof(arr) / sizeof(arr[0]))]; };
  return {pick(temps), pick(ps), pick(mins), rng(), rng() % 100000, pick(ks), 0};
}

void expect_same(const Result& cpu, const Result& gpu, const std::string& what) {
  EXPECT_EQ(gpu.ids, cpu.ids) << what;
  for (size_t i = 0; i < cpu.ids.size(); ++i) {
    if (cpu.ids[i] < 0) {
      EXPECT_TRUE(std::isnan(gpu.logprob[i])) << what << " row " << i;
      continue;
    }
    const double tol = kSampleLogprob.abs + kSampleLogprob.rel * std::fabs(cpu.logprob[i]);
    EXPECT_NEAR(gpu.logprob[i], cpu.logprob[i], tol) << what << " row " << i << " (" << kSampleLogprob.name << ")";
  }
}

} // namespace

// Fresh random rows of Qwen3's and Qwen3.5's vocabularies (and an odd one) at 1..64 rows, every
// variant and the planner's route, each row with its own
// random filter combination, seed and draw number; ties at the top and around the cuts, -inf
// entries, a NaN row and a +inf row.
TEST(GpuSample, SameIdsAsCpuReference) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("sample gpu");
  // 32003: a vocabulary that is not a multiple of 4 (the vector form's tail); odd row counts use
  // a row stride of vocab + 1, so most rows are not 16-byte aligned (the scalar fallback).
  for (int32_t vocab : {151936, 248320, 32003}) {
    auto cpu = make_cpu_backend();
    auto gpu = make_cuda_backend();
    for (int64_t rows : {1, 2, 7, 33, 64}) {
      const int64_t stride = vocab + (rows % 2);
      auto logits = randn(rng, rows * stride, 3.f);
      std::vector<ninfer_sample_row> ps;
      for (int64_t r = 0; r < rows; ++r) {
        float* row = logits.data() + r * stride;
        const float top = *std::max_element(row, row + vocab);
        for (int j = 0; j < 40; ++j) row[rng() % vocab] = top; // tied maxima
        for (int j = 0; j < 300; ++j) row[rng() % vocab] = top - 2.f; // ties near the cuts
        if (r % 3 == 1)
          for (int32_t j = 0; j < vocab; j += 5) row[j] = -kInf;
        ps.push_back(random_params(rng, vocab));
      }
      if (rows > 2) {
        logits[1 * stride + rng() % vocab] = std::nanf("");
        logits[2 * stride + rng() % vocab] = kInf;
      }
      const Result want = run_on(*cpu, logits, stride, ps, vocab, false);
      for (const std::string& route : op_routes(*gpu, NINFER_OP_SAMPLE))
        expect_same(want, run_on(*gpu, logits, stride, ps, vocab, true, route),
                    route_name(route) + ", vocab " + std::to_string(vocab) + ", rows " + std::to_string(rows));
    }
  }
}

// Many draws of one row (row stride 0, draw numbers 0..63) per filter setting, the typical
// settings and the edges: exactly the CPU's ids, including whole rows of ties.
TEST(GpuSample, SameDrawsAsCpuPerSetting) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("sample gpu settings");
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  const int32_t vocab = 248320;
  struct Setting {
    double t;
    int32_t k;
    double p, min_p;
  };
  const Setting settings[] = {{1, 0, 1, 0},     {0.7, 20, 0.95, 0}, {0.6, 0, 0.95, 0},  {1, 0, 0.5, 0.02},
                              {1.3, 5000, 0.9, 0}, {0.8, 1, 1, 0},  {1, 0, 1, 0.1},     {2, 100, 1e-9, 0},
                              {1, 0, 0.999, 0},   {1, 64, 0.9, 0.01}, {0.9, 40, 1, 0}};
  for (int kind = 0; kind < 3; ++kind) {
    std::vector<float> row = randn(rng, vocab, 2.f);
    if (kind == 1) std::fill(row.begin(), row.end(), 0.5f); // one big tie
    if (kind == 2)
      for (auto& x : row) x = std::round(x * 2) / 2; // a few values, each tied thousands of times
    for (const Setting& s : settings) {
      std::vector<ninfer_sample_row> ps(64, ninfer_sample_row{s.t, s.p, s.min_p, rng(), 0, s.k, 0});
      for (size_t i = 0; i < ps.size(); ++i) ps[i].counter = i;
      char what[160];
      std::snprintf(what, sizeof what, "row kind %d, T %g top_k %d top_p %g min_p %g", kind, s.t, s.k, s.p, s.min_p);
      const Result want = run_on(*cpu, row, 0, ps, vocab, false);
      for (const std::string& route : op_routes(*gpu, NINFER_OP_SAMPLE))
        expect_same(want, run_on(*gpu, row, 0, ps, vocab, true, route), route_name(route) + ", " + what);
    }
  }
}

// Not an assertion: the kernel's time per call at 1 and 8 rows of 248,320 (CUDA events around
// each call on the default stream, median of 30), printed for docs/sampling.md.
TEST(GpuSample, Timing) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("sample gpu timing");
  auto gpu = make_cuda_backend();
  const int32_t vocab = 248320;
  struct Setting {
    const char* name;
    double t;
    int32_t k;
    double p, min_p;
  };
  const Setting settings[] = {{"greedy (T=0)", 0, 0, 1, 0},
                              {"T=0.7 top_k=20 top_p=0.95", 0.7, 20, 0.95, 0},
                              {"T=1 (no filter)", 1, 0, 1, 0},
                              {"T=0.6 top_p=0.95", 0.6, 0, 0.95, 0},
                              {"T=1 min_p=0.05", 1, 0, 1, 0.05}};
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int64_t rows : {1, 8}) {
    auto logits = randn(rng, rows * vocab, 3.f);
    DeviceBuffer dl = put(*gpu, logits), di = put(*gpu, std::vector<int32_t>(rows)), dlp = poisoned_buffer(*gpu, rows);
    for (const Setting& s : settings) {
      std::vector<ninfer_sample_row> ps(rows, ninfer_sample_row{s.t, s.p, s.min_p, 7, 0, s.k, 0});
      DeviceBuffer dp = put(*gpu, ps);
      ninfer_sample_args a{dl.as<float>(), vocab, dp.as<ninfer_sample_row>(), di.as<int32_t>(), dlp.as<float>(), rows,
                           vocab};
      const ninfer_shape shape{rows, {vocab, 0, 0, 0}, NINFER_DTYPE_F32};
      for (const ninfer_variant* var : gpu->plugin().variants_for(NINFER_OP_SAMPLE)) {
        const Plan plan = gpu->planner().plan_variant(*var, shape);
        // topk_split's slice lists and its row tickets (left zero by every launch).
        const DeviceBuffer ws = poisoned_buffer(*gpu, std::max<size_t>(plan.workspace_bytes / sizeof(float), 1));
        const DeviceBuffer tickets = put(*gpu, std::vector<uint32_t>(NINFER_LAUNCH_TICKETS, 0));
        gpu->synchronize();
        std::vector<float> ms;
        for (int i = 0; i < 31; ++i) {
          cudaEventRecord(start, nullptr);
          execute(plan, &a, ws.data(), nullptr, tickets.as<uint32_t>());
          cudaEventRecord(stop, nullptr);
          cudaEventSynchronize(stop);
          float t = 0;
          cudaEventElapsedTime(&t, start, stop);
          if (i > 0) ms.push_back(t); // the first call warms up
        }
        std::sort(ms.begin(), ms.end());
        std::printf("[sample timing] %-18s rows %lld vocab %d %-28s median %.1f us\n", var->name,
                    static_cast<long long>(rows), vocab, s.name, 1e3 * ms[ms.size() / 2]);
        EXPECT_EQ(cudaGetLastError(), cudaSuccess);
      }
      {
        // argmax on the same rows, for comparison with the greedy setting
        ninfer_argmax_args g{dl.as<float>(), vocab, di.as<int32_t>(), dlp.as<float>(), rows, vocab};
        if (s.t == 0) {
          // Through the backend: its route may need the workspace and the launch tickets.
          gpu->reserve_workspace(NINFER_OP_ARGMAX, shape);
          std::vector<float> ms;
          for (int i = 0; i < 31; ++i) {
            gpu->synchronize();
            const auto t0 = std::chrono::steady_clock::now();
            gpu->run(NINFER_OP_ARGMAX, shape, &g);
            gpu->synchronize();
            const std::chrono::duration<float, std::milli> t = std::chrono::steady_clock::now() - t0;
            if (i > 0) ms.push_back(t.count());
          }
          std::sort(ms.begin(), ms.end());
          std::printf("[sample timing] %-18s rows %lld vocab %d %-28s median %.1f us\n", "argmax op",
                      static_cast<long long>(rows), vocab, "(for comparison)", 1e3 * ms[ms.size() / 2]);
        }
      }
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

// Small rows (vocab 4099, misaligned stride) with every setting of random_params, every route:
// the same ids as the CPU. Small enough to run under compute-sanitizer (memcheck, racecheck).
TEST(GpuSample, SmallRowsEveryRoute) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto rng = fresh_rng("sample gpu small");
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  const int32_t vocab = 4099;
  const int64_t rows = 24, stride = vocab + 3;
  auto logits = randn(rng, rows * stride, 2.f);
  for (int64_t r = 0; r < rows; r += 4)
    for (int32_t j = 0; j < vocab; ++j) logits[r * stride + j] = std::round(logits[r * stride + j]); // many ties
  std::vector<ninfer_sample_row> ps;
  for (int64_t r = 0; r < rows; ++r) ps.push_back(random_params(rng, vocab));
  const Result want = run_on(*cpu, logits, stride, ps, vocab, false);
  for (const std::string& route : op_routes(*gpu, NINFER_OP_SAMPLE))
    expect_same(want, run_on(*gpu, logits, stride, ps, vocab, true, route), route_name(route) + ", vocab 4099");
}
