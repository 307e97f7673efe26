#include <gtest/gtest.h>

#include "ninfer/abi/ops/causal_conv1d.h"
#include "op_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

// Sequences fed over several calls (some shorter than the kernel, some mixed with others in one
// call) must give what one convolution over each whole sequence gives (PyTorch's Conv1d with
// padding kernel-1, cut to the sequence length, then SiLU).
TEST(CausalConv1dOp, StateCarriesWindowsAcrossCallsAndSequences) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("causal_conv1d");
  const int32_t C = 10, K = 4, slots = 3;
  auto w = randn(rng, size_t(C) * K, 0.7f);
  std::vector<float> state(size_t(slots) * C * (K - 1), 0.f); // new sequences start from zeros
  std::vector<std::vector<std::vector<double>>> hist(slots);  // [slot][pos] -> [C]

  auto call = [&](const TokenBatch& tb, const char* what) {
    const int64_t T = tb.tokens(), xs = C + 2, os = C + 1;
    auto x = randn(rng, T * xs, 2.f);
    auto out = poisoned(T * os);
    ninfer_causal_conv1d_args a{x.data(), xs, w.data(), state.data(), out.data(), os, tb.batch(), T, C, K};
    be.run(NINFER_OP_CAUSAL_CONV1D, {T, {C, K, 0, 0}, NINFER_DTYPE_F32}, &a);
    std::vector<float> got;
    std::vector<double> want;
    for (int64_t t = 0; t < T; ++t) {
      const int32_t slot = tb.seq_slot[tb.token_seq[t]];
      hist[slot].emplace_back(x.begin() + t * xs, x.begin() + t * xs + C);
      const int64_t p = static_cast<int64_t>(hist[slot].size()) - 1;
      for (int c = 0; c < C; ++c) {
        double s = 0;
        for (int j = 0; j < K; ++j) {
          const int64_t src = p - (K - 1) + j;
          if (src >= 0) s += double(w[c * K + j]) * hist[slot][src][c];
        }
        want.push_back(s / (1 + std::exp(-s)));
        got.push_back(out[t * os + c]);
      }
    }
    const Mismatch m = compare(got, want, kFloat32Exact);
    EXPECT_TRUE(m.ok) << what << ": " << m.describe();
  };

  TokenBatch a;
  a.add(1, 0, 7);
  call(a, "prefill of 7");
  TokenBatch b;
  b.add(1, 7, 1);
  b.add(0, 0, 2); // shorter than kernel - 1: the window still holds zeros
  call(b, "decode + short prefill");
  TokenBatch c;
  c.add(0, 2, 5);
  c.add(2, 0, 1);
  c.add(1, 8, 2);
  call(c, "three sequences");
  for (int i = 0; i < 3; ++i) {
    TokenBatch d;
    d.add(2, 1 + i, 1);
    d.add(0, 7 + i, 1);
    call(d, "decode");
  }
}
