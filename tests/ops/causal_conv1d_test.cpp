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

// Speculative verification (NINFER_SHAPE_TOKEN_STATES): the state after every token is the last
// kernel - 1 inputs of the sequence up to it (the earlier call's inputs included), laid out as
// the slot state; the slot state itself still ends at the last token.
TEST(CausalConv1dOp, TokenStatesAreTheWindowAfterEveryToken) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("causal_conv1d token states");
  const int32_t C = 6, K = 4, slots = 3;
  auto w = randn(rng, size_t(C) * K, 0.7f);
  std::vector<float> state(size_t(slots) * C * (K - 1), 0.f);
  std::vector<std::vector<std::vector<float>>> hist(slots); // [slot][pos] -> [C]
  auto call = [&](const TokenBatch& tb, bool keep) {
    const int64_t T = tb.tokens();
    auto x = randn(rng, T * C, 2.f);
    auto out = poisoned(T * C);
    auto token_states = poisoned(size_t(T) * C * (K - 1));
    ninfer_causal_conv1d_args a{x.data(), C, w.data(), state.data(), out.data(), C, tb.batch(), T, C, K,
                                keep ? token_states.data() : nullptr};
    ninfer_shape s{T, {C, K, 0, 0}, NINFER_DTYPE_F32};
    s.flags = keep ? NINFER_SHAPE_TOKEN_STATES : 0u;
    be.run(NINFER_OP_CAUSAL_CONV1D, s, &a);
    std::vector<double> want;
    for (int64_t t = 0; t < T; ++t) {
      const int32_t slot = tb.seq_slot[tb.token_seq[t]];
      hist[slot].emplace_back(x.begin() + t * C, x.begin() + (t + 1) * C);
      const int64_t p = static_cast<int64_t>(hist[slot].size()) - 1;
      for (int c = 0; c < C; ++c)
        for (int j = 0; j < K - 1; ++j) {
          const int64_t src = p - (K - 2) + j; // oldest first; before the sequence: zeros
          want.push_back(src >= 0 ? hist[slot][src][c] : 0.0);
        }
    }
    return std::pair{token_states, want};
  };
  TokenBatch a;
  a.add(0, 0, 5);
  a.add(2, 0, 1);
  call(a, false);
  TokenBatch b;
  b.add(2, 1, 4); // the window still reaches back into zeros
  b.add(0, 5, 4);
  b.add(1, 0, 2);
  const auto [got, want] = call(b, true);
  const Mismatch m = compare(got, want, kFloat32Exact);
  EXPECT_TRUE(m.ok) << "token states: " << m.describe();
  // The slots' states are the token states of their last tokens.
  for (int32_t i = 0; i < 3; ++i) {
    const int32_t slot = b.seq_slot[i], last = b.seq_start[i + 1] - 1;
    const size_t n = size_t(C) * (K - 1);
    EXPECT_TRUE(std::equal(state.begin() + slot * n, state.begin() + (slot + 1) * n, got.begin() + last * n))
        << "slot " << slot;
  }
}
