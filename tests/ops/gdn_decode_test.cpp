// The fused Gated DeltaNet ops of the CPU plugin against float64 oracles written here from the
// contracts: conv_l2_norm (causal_conv1d, then the first heads L2-normalised) over prompts and
// decode steps that carry the conv state, and gated_delta_step (gating from raw projections,
// one delta-rule update, gated output norm) over decode batches in any slot order.
#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "ninfer/abi/ops/conv_l2_norm.h"
#include "ninfer/abi/ops/gated_delta_step.h"
#include "op_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

double silu(double z) { return z / (1 + std::exp(-z)); }

} // namespace

// Two normed heads of 6 channels and 5 plain channels after them; rows wider than the channels
// (the conv reads a slice of the projection row). The oracle keeps every sequence's inputs.
TEST(ConvL2NormOp, ConvolvesCarriesStateAndNormalisesTheLeadingHeads) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("conv_l2_norm");
  const int32_t heads = 2, dim = 6, C = heads * dim + 5, K = 4, slots = 3;
  const float eps = 1e-6f;
  auto w = randn(rng, size_t(C) * K, 0.7f);
  std::vector<float> state(size_t(slots) * C * (K - 1), 0.f);
  std::vector<std::vector<std::vector<double>>> hist(slots); // [slot][pos] -> [C]

  auto call = [&](const TokenBatch& tb, const char* what) {
    const int64_t T = tb.tokens(), xs = C + 3, os = C + 2;
    auto x = randn(rng, T * xs, 2.f);
    auto out = poisoned(T * os);
    ninfer_conv_l2_norm_args a{};
    a.conv = {x.data(), xs, w.data(), state.data(), out.data(), os, tb.batch(), T, C, K};
    a.norm_heads = heads;
    a.norm_dim = dim;
    a.eps = eps;
    be.run(NINFER_OP_CONV_L2_NORM, {T, {C, K, tb.max_seq_tokens(), dim}, NINFER_DTYPE_F32}, &a);
    std::vector<float> got;
    std::vector<double> want;
    for (int64_t t = 0; t < T; ++t) {
      const int32_t slot = tb.seq_slot[tb.token_seq[t]];
      hist[slot].emplace_back(x.begin() + t * xs, x.begin() + t * xs + C);
      const int64_t p = static_cast<int64_t>(hist[slot].size()) - 1;
      std::vector<double> row(C);
      for (int c = 0; c < C; ++c) {
        double s = 0;
        for (int j = 0; j < K; ++j)
          if (const int64_t src = p - (K - 1) + j; src >= 0) s += double(w[c * K + j]) * hist[slot][src][c];
        row[c] = silu(s);
      }
      for (int h = 0; h < heads; ++h) {
        double ss = 0;
        for (int i = 0; i < dim; ++i) ss += row[h * dim + i] * row[h * dim + i];
        for (int i = 0; i < dim; ++i) row[h * dim + i] /= std::sqrt(ss + eps);
      }
      want.insert(want.end(), row.begin(), row.end());
      got.insert(got.end(), out.begin() + t * os, out.begin() + t * os + C);
      EXPECT_TRUE(std::isnan(out[t * os + C]) && std::isnan(out[t * os + C + 1])) << what << ": row padding written";
    }
    const Mismatch m = compare(got, want, kFloat32Exact);
    EXPECT_TRUE(m.ok) << what << ": " << m.describe();
  };

  TokenBatch prompt;
  prompt.add(1, 0, 7);
  prompt.add(0, 0, 2); // shorter than the kernel
  call(prompt, "prompts of 7 and 2");
  for (int step = 0; step < 3; ++step) {
    TokenBatch decode;
    decode.add(0, 2 + step, 1);
    decode.add(2, step, 1);
    decode.add(1, 7 + step, 1);
    call(decode, "decode batch");
  }
}

namespace {

// Three value heads per key head, and k_dim != v_dim, so a wrong head mapping or a transposed
// state cannot pass.
struct StepCfg {
  int32_t k_heads = 2, v_heads = 6, k_dim = 8, v_dim = 12, slots = 4;
  float eps = 1e-6f;
  float scale() const { return 1.f / std::sqrt(float(k_dim)); }
  size_t state_elems() const { return size_t(slots) * v_heads * k_dim * v_dim; }
};

// One decode call's inputs, as Qwen3.5 lays them out: the conv row [q | k | v] and the
// projection row [.. | z | a | b], both wider than what the op reads.
struct StepInputs {
  int64_t T, conv_row, proj_row;
  std::vector<float> conv, proj;
  StepInputs(const StepCfg& c, int64_t tokens, std::mt19937_64& rng) : T(tokens) {
    conv_row = 2 * c.k_heads * c.k_dim + c.v_heads * c.v_dim + 1;
    proj_row = c.v_heads * c.v_dim + 2 * c.v_heads + 3;
    conv = randn(rng, T * conv_row);
    proj = randn(rng, T * proj_row, 1.5f);
    for (int64_t t = 0; t < T; ++t) // q and k L2-normalised per head, as conv_l2_norm leaves them
      for (int h = 0; h < 2 * c.k_heads; ++h) {
        float* r = &conv[t * conv_row + h * c.k_dim];
        double ss = 0;
        for (int i = 0; i < c.k_dim; ++i) ss += double(r[i]) * r[i];
        for (int i = 0; i < c.k_dim; ++i) r[i] = float(r[i] / std::sqrt(ss));
      }
  }
  const float* q(int64_t t, const StepCfg&) const { return &conv[t * conv_row]; }
  const float* k(int64_t t, const StepCfg& c) const { return &conv[t * conv_row + c.k_heads * c.k_dim]; }
  const float* v(int64_t t, const StepCfg& c) const { return &conv[t * conv_row + 2 * c.k_heads * c.k_dim]; }
  const float* z(int64_t t, const StepCfg&) const { return &proj[t * proj_row + 1]; }
  const float* a(int64_t t, const StepCfg& c) const { return &proj[t * proj_row + 1 + c.v_heads * c.v_dim]; }
  const float* b(int64_t t, const StepCfg& c) const { return a(t, c) + c.v_heads; }
};

struct StepParams {
  std::vector<float> a_log, dt_bias, norm_w;
};

// token_states, when given, receives the state after every token (a verification pass).
std::vector<float> run_step(Backend& be, const StepCfg& c, const StepParams& p, const StepInputs& in,
                            const TokenBatch& tb, std::vector<float>& state, int64_t out_row,
                            std::vector<float>* token_states = nullptr) {
  auto out = poisoned(in.T * out_row);
  ninfer_gated_delta_step_args a{};
  a.q = in.q(0, c);
  a.k = in.k(0, c);
  a.qk_token_stride = in.conv_row;
  a.v = in.v(0, c);
  a.v_token_stride = in.conv_row;
  a.a = in.a(0, c);
  a.b = in.b(0, c);
  a.ab_token_stride = in.proj_row;
  a.a_log = p.a_log.data();
  a.dt_bias = p.dt_bias.data();
  a.z = in.z(0, c);
  a.z_token_stride = in.proj_row;
  a.norm_w = p.norm_w.data();
  a.eps = c.eps;
  a.scale = c.scale();
  a.state = state.data();
  a.out = out.data();
  a.out_token_stride = out_row;
  a.batch = tb.batch();
  a.tokens = in.T;
  a.k_heads = c.k_heads;
  a.v_heads = c.v_heads;
  a.k_dim = c.k_dim;
  a.v_dim = c.v_dim;
  a.token_states = token_states ? token_states->data() : nullptr;
  ninfer_shape s{in.T, {c.v_heads, c.k_dim, c.v_dim, c.k_heads}, NINFER_DTYPE_F32};
  s.max_seq_tokens = tb.max_seq_tokens();
  s.flags = token_states ? NINFER_SHAPE_TOKEN_STATES : 0u;
  be.reserve_workspace(NINFER_OP_GATED_DELTA_STEP, s);
  be.run(NINFER_OP_GATED_DELTA_STEP, s, &a);
  return out;
}

// The contract in double, the state kept in double across calls.
struct StepOracle {
  StepCfg c;
  std::vector<double> S;
  std::vector<double> token_states; // the last run's: [T, v_heads, k_dim, v_dim]
  explicit StepOracle(const StepCfg& cfg) : c(cfg), S(cfg.state_elems(), 0.0) {}
  std::vector<double> run(const StepParams& p, const StepInputs& in, const TokenBatch& tb) {
    std::vector<double> out;
    token_states.clear();
    for (int64_t t = 0; t < in.T; ++t) {
      const int32_t slot = tb.seq_slot[tb.token_seq[t]];
      for (int h = 0; h < c.v_heads; ++h) {
        const int kh = h / (c.v_heads / c.k_heads);
        const double za = double(in.a(t, c)[h]) + p.dt_bias[h];
        const double g = -std::exp(double(p.a_log[h])) * std::log1p(std::exp(za));
        const double beta = 1 / (1 + std::exp(-double(in.b(t, c)[h])));
        double* s = &S[(size_t(slot) * c.v_heads + h) * c.k_dim * c.v_dim];
        const size_t head = size_t(c.k_dim) * c.v_dim;
        const float* q = in.q(t, c) + kh * c.k_dim;
        const float* k = in.k(t, c) + kh * c.k_dim;
        const float* v = in.v(t, c) + h * c.v_dim;
        for (int i = 0; i < c.k_dim * c.v_dim; ++i) s[i] *= std::exp(g);
        std::vector<double> o(c.v_dim);
        for (int j = 0; j < c.v_dim; ++j) {
          double pred = 0;
          for (int i = 0; i < c.k_dim; ++i) pred += s[i * c.v_dim + j] * k[i];
          const double u = beta * (v[j] - pred);
          for (int i = 0; i < c.k_dim; ++i) s[i * c.v_dim + j] += double(k[i]) * u;
          for (int i = 0; i < c.k_dim; ++i) o[j] += s[i * c.v_dim + j] * c.scale() * q[i];
        }
        double ss = 0;
        for (double x : o) ss += x * x;
        const double inv = 1 / std::sqrt(ss / c.v_dim + c.eps);
        const float* z = in.z(t, c) + h * c.v_dim;
        for (int j = 0; j < c.v_dim; ++j) out.push_back(o[j] * inv * p.norm_w[j] * silu(z[j]));
        token_states.insert(token_states.end(), s, s + head);
      }
    }
    return out;
  }
};

} // namespace

TEST(GatedDeltaStepOp, MatchesTheDoubleOracleOverDecodeBatches) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("gated_delta_step oracle");
  const StepCfg c;
  StepParams p{randn(rng, c.v_heads, 0.5f), randn(rng, c.v_heads, 0.5f), randn(rng, c.v_dim, 0.3f)};
  for (auto& w : p.norm_w) w += 1.f;
  StepOracle oracle(c);
  std::vector<float> state(c.state_elems(), 0.f);
  const int64_t out_row = int64_t{c.v_heads} * c.v_dim + 2;
  // Slots in any order, batches of 4, 1 and 3, and a slot that skips a step.
  const std::vector<std::vector<std::pair<int32_t, int32_t>>> calls = {
      {{2, 0}, {0, 0}, {3, 0}, {1, 0}}, {{0, 1}}, {{3, 1}, {0, 2}, {2, 1}}, {{1, 1}, {2, 2}, {0, 3}, {3, 2}}};
  for (size_t i = 0; i < calls.size(); ++i) {
    TokenBatch tb;
    for (auto [slot, pos] : calls[i]) tb.add(slot, pos, 1);
    const StepInputs in(c, tb.tokens(), rng);
    const auto got = run_step(be, c, p, in, tb, state, out_row);
    const auto want = oracle.run(p, in, tb);
    std::vector<float> rows;
    for (int64_t t = 0; t < in.T; ++t) {
      rows.insert(rows.end(), got.begin() + t * out_row, got.begin() + t * out_row + c.v_heads * c.v_dim);
      EXPECT_TRUE(std::isnan(got[t * out_row + out_row - 1])) << "call " << i << ": row padding written";
    }
    const Mismatch m = compare(rows, want, kFloat32Exact);
    EXPECT_TRUE(m.ok) << "call " << i << ": " << m.describe();
  }
  const Mismatch ms = compare(state, oracle.S, kFloat32Exact);
  EXPECT_TRUE(ms.ok) << "final state: " << ms.describe();
}

// A verification pass: sequences of 1 to 4 tokens (slots in any order), each walked from the
// state its previous token left, with the state after every token kept.
TEST(GatedDeltaStepOp, WalksAVerificationPassAndKeepsEveryTokensState) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("gated_delta_step verification");
  const StepCfg c;
  StepParams p{randn(rng, c.v_heads, 0.5f), randn(rng, c.v_heads, 0.5f), randn(rng, c.v_dim, 0.3f)};
  for (auto& w : p.norm_w) w += 1.f;
  StepOracle oracle(c);
  std::vector<float> state(c.state_elems(), 0.f);
  const int64_t out_row = int64_t{c.v_heads} * c.v_dim;
  // (slot, position, tokens): a round of K = 3 drafts, then one of mixed lengths.
  const std::vector<std::vector<std::array<int32_t, 3>>> calls = {
      {{3, 0, 4}, {1, 0, 4}, {0, 0, 4}}, {{1, 4, 2}, {2, 0, 1}, {0, 4, 3}, {3, 4, 4}}};
  for (size_t i = 0; i < calls.size(); ++i) {
    TokenBatch tb;
    for (auto [slot, pos, n] : calls[i]) tb.add(slot, pos, n);
    const StepInputs in(c, tb.tokens(), rng);
    std::vector<float> kept = poisoned(size_t(in.T) * c.v_heads * c.k_dim * c.v_dim);
    const auto got = run_step(be, c, p, in, tb, state, out_row, &kept);
    const auto want = oracle.run(p, in, tb);
    const Mismatch m = compare(got, want, kFloat32Exact);
    EXPECT_TRUE(m.ok) << "call " << i << ": " << m.describe();
    const Mismatch mk = compare(kept, oracle.token_states, kFloat32Exact);
    EXPECT_TRUE(mk.ok) << "call " << i << ", token states: " << mk.describe();
  }
  const Mismatch ms = compare(state, oracle.S, kFloat32Exact);
  EXPECT_TRUE(ms.ok) << "final state: " << ms.describe();
}
