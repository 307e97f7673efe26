// What the GPU op tests share: a Backend on the CUDA plugin chosen for device 0 (tests skip
// when there is none), one on the CPU reference plugin, and helpers to put the same host data
// on both. Every GPU op test runs an op on both backends with the same fresh random inputs and
// compares the GPU result with the CPU plugin's (itself checked against float64 oracles in
// tests/ops), outputs poisoned with NaN before each run.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ninfer/devices/device.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/runtime/backend.hpp"
#include "test_support.hpp"

namespace ninfer::test {

inline const PluginHost& gpu_op_plugins() { return build_plugins(); }

// Why there is no CUDA backend here, or empty when there is one.
inline std::string cuda_unavailable() {
  const Discovery d = discover_devices();
  if (d.cuda.empty()) return "no CUDA device (" + d.note + ")";
  if (!gpu_op_plugins().choose(d.cuda.front(), forced_test_plugin()).chosen)
    return std::string("no plugin of this build runs on ") + d.cuda.front().name;
  return "";
}

#define NINFER_REQUIRE_CUDA_BACKEND()                                                  \
  do {                                                                                 \
    const std::string why_ = ::ninfer::test::cuda_unavailable();                       \
    if (!why_.empty()) GTEST_SKIP() << why_;                                           \
  } while (0)

// Fresh backends per test, so plan caches and workspaces never leak between tests.
inline std::unique_ptr<Backend> make_cuda_backend() {
  BackendOptions o;
  o.plugin = forced_test_plugin(); // $NINFER_TEST_PLUGIN, e.g. cuda-generic
  return std::make_unique<Backend>(gpu_op_plugins(), discover_devices().cuda.front(), o);
}
inline std::unique_ptr<Backend> make_cpu_backend() {
  return std::make_unique<Backend>(*gpu_op_plugins().find("cpu"), host_device());
}

// A buffer on `be` holding `host` (any trivially copyable element type).
template <class T>
DeviceBuffer put(Backend& be, const std::vector<T>& host, const char* what = "test input") {
  DeviceBuffer b = be.allocate(host.size() * sizeof(T), MemoryUse::Activations, what);
  be.upload(b, 0, host.data(), host.size() * sizeof(T));
  return b;
}

// A float buffer of n elements, every one NaN: an element the op does not write fails.
inline DeviceBuffer poisoned_buffer(Backend& be, size_t n, const char* what = "test output") {
  return put(be, std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()), what);
}

template <class T>
std::vector<T> get(Backend& be, const DeviceBuffer& b, size_t n) {
  std::vector<T> out(n);
  be.synchronize();
  be.download(b, 0, out.data(), n * sizeof(T));
  return out;
}

inline std::vector<float> randn(std::mt19937_64& rng, size_t n, float scale = 1.f) {
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

inline std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// GPU float32 vs the CPU plugin's float32 (double-accumulated where cheap): same inputs,
// different summation order and fused multiply-adds.
inline constexpr Tolerance kGpuVsCpuF32{"gpu-f32-vs-cpu-reference", 1e-4, 1e-4};

// The relative L2 error of `got` against `want` over the whole output must be <= `bound`, and
// every element finite: the check of a route that rounds its inputs (bf16 activations), where
// single elements may move by the rounding but the output as a whole may not. A failure names
// each non-finite element (the first as got / want), or the relative error as `got` against
// the bound as `want`.
inline Mismatch compare_rel_l2(const std::vector<float>& got, const std::vector<double>& want, double bound) {
  Mismatch m;
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) { // NaN never passes: unwritten (poisoned) or broken
      if (m.ok) m.index = i, m.got = got[i], m.want = want[i];
      m.ok = false;
      ++m.count;
      continue;
    }
    err2 += (got[i] - want[i]) * (got[i] - want[i]);
    ref2 += want[i] * want[i];
  }
  const double rel = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  if (rel > bound) {
    m.ok = false;
    m.got = rel, m.want = bound;
    ++m.count;
  }
  return m;
}

} // namespace ninfer::test
