// The run-time compiled linear kernels (plugins/cuda/kernels/linear/gemv_warp_template.cuh) executed on the host,
// so CI checks their arithmetic and indexing without a GPU: the source is compiled here as C++
// with a few stand-ins for CUDA built-ins; the 32 lanes of a warp are coroutines (ucontext) on
// one thread that take turns, and a warp shuffle is a point where every lane has stored its value
// before any reads its partner's. Every sweep point runs against a float64 oracle at token counts
// that fill, underfill and overflow its tile, on shapes that take the vector path and the scalar
// one, with __ldg refusing misaligned vector loads and NaN-poisoned outputs catching stray writes.
// The GPU runs the same checks on the real thing (tests/gpu_generic/jit_linear_gpu_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <ucontext.h>

#include <functional>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gemv_family.hpp"

// --- stand-ins for the CUDA built-ins the kernel source uses -------------------------------
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(x)
struct uint4 {
  unsigned x, y, z, w;
};
struct uint2 {
  unsigned x, y;
};
struct EmuDim {
  unsigned x = 0, y = 0, z = 0;
};
EmuDim threadIdx, blockIdx; // of the lane running now
EmuDim gridDim;

// A misaligned vector load faults on the GPU; here it fails the test.
template <class T>
T __ldg(const T* p) {
  if (reinterpret_cast<uintptr_t>(p) % sizeof(T) != 0)
    throw std::runtime_error("misaligned " + std::to_string(sizeof(T)) + "-byte load");
  return *p;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
using std::min;

// One warp at a time. The scheduler resumes lanes 0..31 in turn; a lane runs until its next
// shuffle (where it stores its value and yields) or its end. Every lane reaches the same shuffles
// (the kernel's only early return is warp-uniform), so after one round all 32 values of that
// shuffle are stored; in the next round each lane reads its partner's. Two buffers, because a
// lane may store its next value before a later lane has read the current one.
struct Warp {
  ucontext_t scheduler{};
  ucontext_t lane[32]{};
  bool done[32]{};
  int phase[32]{};
  float values[2][32]{};
  int running = 0;
  std::function<void(int)> body;
  std::exception_ptr failed;
};
Warp* g_warp = nullptr;

// The lanes' stacks, made once (uninitialised: zeroing megabytes per warp would dominate).
constexpr size_t kLaneStack = 128 * 1024;
char* lane_stack(int lane) {
  static char* stacks = new char[32 * kLaneStack];
  return stacks + static_cast<size_t>(lane) * kLaneStack;
}

inline float __shfl_xor_sync(unsigned, float v, int mask) {
  Warp& w = *g_warp;
  const int lane = w.running, ph = w.phase[lane]++ & 1;
  w.values[ph][lane] = v;
  swapcontext(&w.lane[lane], &w.scheduler);
  return w.values[ph][lane ^ mask];
}

void lane_entry() {
  Warp& w = *g_warp;
  try {
    w.body(w.running);
  } catch (...) {
    if (!w.failed) w.failed = std::current_exception();
  }
  w.done[w.running] = true; // returning resumes uc_link: the scheduler
}

// Runs body(lane) for the 32 lanes of warp `warp` of CTA (bx, by), each seeing its own
// threadIdx; rethrows the first exception of a lane.
void run_warp(int warp, unsigned bx, unsigned by, const std::function<void(int)>& body) {
  Warp w;
  w.body = body;
  g_warp = &w;
  for (int l = 0; l < 32; ++l) {
    getcontext(&w.lane[l]);
    w.lane[l].uc_stack.ss_sp = lane_stack(l);
    w.lane[l].uc_stack.ss_size = kLaneStack;
    w.lane[l].uc_link = &w.scheduler;
    makecontext(&w.lane[l], lane_entry, 0);
  }
  for (bool any = true; any;) {
    any = false;
    for (int l = 0; l < 32; ++l) {
      if (w.done[l]) continue;
      any = true;
      w.running = l;
      threadIdx.x = static_cast<unsigned>(warp * 32 + l);
      blockIdx.x = bx;
      blockIdx.y = by;
      swapcontext(&w.scheduler, &w.lane[l]);
    }
  }
  g_warp = nullptr;
  if (w.failed) std::rethrow_exception(w.failed);
}

#include "linear/gemv_warp_template.cuh"

namespace {

uint16_t to_bf16(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

struct Case {
  int K, N, T, x_pad, y_pad;
  bool bf16;
};

// Runs the grid the variant would launch (grid.x from the rows, grid.y = the planner's token
// tiles) warp by warp; returns the worst error relative to sum |x w| and whether anything outside
// y[0..T) x [0..N) was written. With `accumulate`, y[0..T) x [0..N) starts random and the
// oracle adds it; without, it starts NaN, so reading it would fail. An exception in a lane (a
// misaligned load) is rethrown.
template <int TH, int R, int V, int M>
std::pair<double, bool> run(const Case& c, int accumulate, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int xs = c.K + c.x_pad, ys = c.N + c.y_pad;
  std::vector<float> x(static_cast<size_t>(c.T) * xs), wf(static_cast<size_t>(c.N) * c.K);
  std::vector<uint16_t> wb(wf.size());
  for (float& v : x) v = u(rng);
  for (size_t i = 0; i < wf.size(); ++i) {
    wb[i] = to_bf16(u(rng));
    wf[i] = c.bf16 ? __uint_as_float(static_cast<unsigned>(wb[i]) << 16) : u(rng);
  }
  std::vector<float> y(static_cast<size_t>(c.T + 1) * ys, NAN);
  if (accumulate)
    for (int t = 0; t < c.T; ++t)
      for (int n = 0; n < c.N; ++n) y[static_cast<size_t>(t) * ys + n] = u(rng);
  const std::vector<float> y0 = y;
  const void* w = c.bf16 ? static_cast<const void*>(wb.data()) : wf.data();
  const int rows_per_cta = TH / 32 * R;
  gridDim = {static_cast<unsigned>((c.N + rows_per_cta - 1) / rows_per_cta), static_cast<unsigned>((c.T + M - 1) / M), 1};
  for (unsigned by = 0; by < gridDim.y; ++by)
    for (unsigned bx = 0; bx < gridDim.x; ++bx)
      for (int warp = 0; warp < TH / 32; ++warp) {
        if ((static_cast<int64_t>(bx) * (TH / 32) + warp) * R >= c.N) continue; // a warp without rows returns at once
        run_warp(warp, bx, by, [&](int) {
          if (c.bf16) ninfer_jit::gemv<ninfer_jit::Bf16, TH, R, V, M>(x.data(), xs, w, y.data(), ys, c.K, c.N, 0, c.T, accumulate);
          else ninfer_jit::gemv<ninfer_jit::F32, TH, R, V, M>(x.data(), xs, w, y.data(), ys, c.K, c.N, 0, c.T, accumulate);
        });
      }
  double worst = 0;
  bool stray = false;
  for (int t = 0; t <= c.T; ++t)
    for (int n = 0; n < ys; ++n) {
      const float got = y[static_cast<size_t>(t) * ys + n];
      if (t == c.T || n >= c.N) {
        stray |= !std::isnan(got);
        continue;
      }
      double want = 0, mag = 0;
      if (accumulate) {
        want = y0[static_cast<size_t>(t) * ys + n];
        mag = std::abs(want);
      }
      for (int k = 0; k < c.K; ++k) {
        const double p = double(x[static_cast<size_t>(t) * xs + k]) * wf[static_cast<size_t>(n) * c.K + k];
        want += p;
        mag += std::abs(p);
      }
      worst = std::max(worst, std::isfinite(got) ? std::abs(got - want) / (mag + 1e-30) : INFINITY);
    }
  return {worst, stray};
}

// The vector path (K a multiple of 8, 16-byte x rows) and the scalar one (odd K; a padded x
// stride off the vector alignment), both dtypes; N (set per point) is one CTA's rows and a few
// more, so a second CTA is mostly empty (and some of its warps have no rows at all).
const Case kCases[] = {{264, 0, 0, 4, 3, true}, {133, 0, 0, 0, 0, false}, {136, 0, 0, 1, 1, true}};

template <int TH, int R, int V, int M>
void check_point(std::set<std::string>& seen, std::mt19937& rng) {
  const std::string name = ninfer::cuda_plugin::jit::gemv_name({TH, R, V, M});
  seen.insert(name);
  int i = 0;
  for (Case c : kCases) {
    c.N = TH / 32 * R + 3 + i;
    c.T = std::max(1, M - 1 + (i++ % 3)); // M - 1, M, M + 1 tokens: an underfilled, full and second tile
    for (int accumulate : {0, 1}) try {
        const auto [err, stray] = run<TH, R, V, M>(c, accumulate, rng);
        EXPECT_LE(err, 1e-5) << name << " K=" << c.K << " N=" << c.N << " T=" << c.T << " bf16=" << c.bf16
                             << " accumulate=" << accumulate;
        EXPECT_FALSE(stray) << name << " wrote outside y[0..T) x [0..N)";
      } catch (const std::exception& e) {
        ADD_FAILURE() << name << " K=" << c.K << " T=" << c.T << " accumulate=" << accumulate << ": " << e.what();
      }
  }
}

template <int TH, int R, int V>
void check_m(std::set<std::string>& seen, std::mt19937& rng) {
  check_point<TH, R, V, 1>(seen, rng);
  check_point<TH, R, V, 2>(seen, rng);
  check_point<TH, R, V, 4>(seen, rng);
  check_point<TH, R, V, 8>(seen, rng);
}

} // namespace

TEST(JitGemvHostEmulation, EverySweepPointMatchesAFloat64Oracle) {
  std::mt19937 rng(20261130);
  std::set<std::string> seen;
  check_m<128, 1, 4>(seen, rng), check_m<128, 1, 8>(seen, rng), check_m<128, 2, 4>(seen, rng);
  check_m<128, 2, 8>(seen, rng), check_m<128, 4, 4>(seen, rng), check_m<128, 4, 8>(seen, rng);
  check_m<256, 1, 4>(seen, rng), check_m<256, 1, 8>(seen, rng), check_m<256, 2, 4>(seen, rng);
  check_m<256, 2, 8>(seen, rng), check_m<256, 4, 4>(seen, rng), check_m<256, 4, 8>(seen, rng);
  // The instantiations above are exactly ninfer-tune's sweep (if the sweep changes, so must they).
  std::set<std::string> sweep;
  for (int64_t t : {1, 2, 4, 8})
    for (const auto& p : ninfer::cuda_plugin::jit::gemv_sweep(t)) sweep.insert(ninfer::cuda_plugin::jit::gemv_name(p));
  EXPECT_EQ(seen, sweep);
}

// Outside the sweep: the widest vectors and rows, and 2-element loads, still add up.
TEST(JitGemvHostEmulation, OtherParameterSetsToo) {
  std::mt19937 rng(7);
  std::set<std::string> seen;
  check_point<64, 8, 2, 3>(seen, rng);
  check_point<512, 8, 8, 5>(seen, rng);
  check_point<64, 1, 2, 1>(seen, rng);
}
