// What the op tests share: a Backend on the build's CPU plugin, poisoned output buffers, random
// inputs, and token batches. The CPU backend's buffers are host memory, so tests pass
// std::vector storage to ops directly.
#pragma once

#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "ninfer/abi/ops/token_batch.h"
#include "ninfer/abi/plugin_abi.h"
#include "ninfer/devices/device.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/runtime/backend.hpp"
#include "test_support.hpp"

namespace ninfer::test {

inline const PluginHost& op_test_plugins() { return build_plugins(); }

// A fresh backend per test: plan caches and workspace never leak between tests.
inline Backend cpu_backend() {
  const LoadedPlugin* cpu = op_test_plugins().find("cpu");
  if (!cpu) throw std::runtime_error("the cpu plugin was not found in " + plugin_dir().string());
  return Backend(*cpu, host_device());
}

// NaN-filled: an element the op does not write fails every comparison.
inline std::vector<float> poisoned(size_t n) { return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()); }

inline std::vector<float> randn(std::mt19937_64& rng, size_t n, float scale = 1.f) {
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

inline std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Random `linear` weights [N, K] (scale 1/sqrt(K)) in the two forms a test needs: `f`, the
// values the op computes with (rounded to bf16 when dtype is BF16), and `bf16`, their stored bits.
struct LinearWeights {
  std::vector<float> f;
  std::vector<uint16_t> bf16;
  int32_t dtype;
  // What ninfer_linear_args.w takes for `dtype`.
  const void* data() const { return dtype == NINFER_DTYPE_F32 ? static_cast<const void*>(f.data()) : bf16.data(); }
};

inline LinearWeights random_linear_weights(std::mt19937_64& rng, int32_t N, int32_t K, int32_t dtype) {
  LinearWeights w{randn(rng, static_cast<size_t>(N) * K, 1.f / std::sqrt(float(K))), {}, dtype};
  w.bf16.resize(w.f.size());
  for (size_t i = 0; i < w.f.size(); ++i) {
    w.bf16[i] = to_bf16(w.f[i]);
    if (dtype == NINFER_DTYPE_BF16) w.f[i] = from_bf16(w.bf16[i]);
  }
  return w;
}

// Host arrays of a token batch; batch() points into them.
struct TokenBatch {
  std::vector<int32_t> seq_start{0}, seq_slot, token_pos, token_seq;

  // Appends a sequence of `n` tokens in `slot` whose first token sits at position `pos0`.
  void add(int32_t slot, int32_t pos0, int32_t n) {
    const int32_t seq = static_cast<int32_t>(seq_slot.size());
    seq_slot.push_back(slot);
    for (int32_t i = 0; i < n; ++i) {
      token_pos.push_back(pos0 + i);
      token_seq.push_back(seq);
    }
    seq_start.push_back(seq_start.back() + n);
  }
  int64_t tokens() const { return static_cast<int64_t>(token_pos.size()); }
  int32_t max_seq_tokens() const {
    int32_t m = 0;
    for (size_t i = 0; i + 1 < seq_start.size(); ++i) m = std::max(m, seq_start[i + 1] - seq_start[i]);
    return m;
  }
  ninfer_token_batch batch() const {
    return {static_cast<int32_t>(seq_slot.size()), seq_start.data(), seq_slot.data(), token_pos.data(),
            token_seq.data()};
  }
};

} // namespace ninfer::test
