#include <gtest/gtest.h>

#include "ninfer/abi/ops/gated_delta_rule.h"
#include "ninfer/support/error.hpp"
#include "op_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

// Two value heads per key head (Qwen3.5's GDN has 16 key / 48 value heads), and key and value
// dims that differ, so a swapped head mapping or a transposed state cannot pass.
struct Cfg {
  int32_t k_heads = 2, v_heads = 4, k_dim = 16, v_dim = 8, slots = 3;
  float scale() const { return 1.f / std::sqrt(float(k_dim)); }
  size_t state_elems() const { return size_t(slots) * v_heads * k_dim * v_dim; }
};

// One call's inputs, laid out as Qwen3.5 has them: q | k | v side by side in the conv output.
struct CallInputs {
  int64_t T, row;
  std::vector<float> qkv, g, beta;
  CallInputs(const Cfg& c, int64_t tokens, std::mt19937_64& rng) : T(tokens) {
    row = 2 * c.k_heads * c.k_dim + c.v_heads * c.v_dim + 3;
    qkv = randn(rng, T * row);
    for (int64_t t = 0; t < T; ++t) // q and k L2-normalised per head, as the model feeds them
      for (int part = 0; part < 2; ++part)
        for (int h = 0; h < c.k_heads; ++h) {
          float* r = &qkv[t * row + (part * c.k_heads + h) * c.k_dim];
          double ss = 0;
          for (int i = 0; i < c.k_dim; ++i) ss += double(r[i]) * r[i];
          for (int i = 0; i < c.k_dim; ++i) r[i] = float(r[i] / std::sqrt(ss));
        }
    std::uniform_real_distribution<float> gd(-3.f, -0.01f), bd(0.02f, 0.98f);
    g.resize(T * c.v_heads);
    beta.resize(T * c.v_heads);
    for (auto& x : g) x = gd(rng);
    for (auto& x : beta) x = bd(rng);
  }
  const float* q() const { return qkv.data(); }
  const float* k(const Cfg& c) const { return qkv.data() + c.k_heads * c.k_dim; }
  const float* v(const Cfg& c) const { return qkv.data() + 2 * c.k_heads * c.k_dim; }
};

// Runs one call through `variant` ("" = the planner's choice); returns out [T, v_heads*v_dim].
std::vector<float> run_gdr(Backend& be, const Cfg& c, const CallInputs& in, const TokenBatch& tb,
                           std::vector<float>& state, const std::string& variant) {
  const int64_t os = int64_t{c.v_heads} * c.v_dim;
  auto out = poisoned(in.T * os);
  ninfer_gated_delta_rule_args a{in.q(), in.k(c), in.row, in.v(c), in.row, in.g.data(), in.beta.data(),
                                 state.data(), out.data(), os, tb.batch(), in.T, c.k_heads, c.v_heads,
                                 c.k_dim, c.v_dim, c.scale()};
  const ninfer_shape s{in.T, {tb.max_seq_tokens(), c.v_heads, c.k_dim, c.v_dim}, NINFER_DTYPE_F32};
  if (variant.empty()) {
    be.reserve_workspace(NINFER_OP_GATED_DELTA_RULE, s);
    be.run(NINFER_OP_GATED_DELTA_RULE, s, &a);
  } else {
    be.run_variant(NINFER_OP_GATED_DELTA_RULE, variant, s, &a);
  }
  return out;
}

// The contract's recurrence in double, token by token, with the state kept in double across
// calls: written from the header, independent of both plugin forms.
struct Oracle {
  Cfg c;
  std::vector<double> S; // [slots, v_heads, k_dim, v_dim]
  explicit Oracle(const Cfg& cfg) : c(cfg), S(cfg.state_elems(), 0.0) {}
  std::vector<double> run(const CallInputs& in, const TokenBatch& tb) {
    std::vector<double> out(in.T * c.v_heads * c.v_dim);
    for (int64_t t = 0; t < in.T; ++t) {
      const int32_t slot = tb.seq_slot[tb.token_seq[t]];
      for (int h = 0; h < c.v_heads; ++h) {
        const int kh = h / (c.v_heads / c.k_heads);
        double* s = &S[(size_t(slot) * c.v_heads + h) * c.k_dim * c.v_dim];
        const float* q = in.q() + t * in.row + kh * c.k_dim;
        const float* k = in.k(c) + t * in.row + kh * c.k_dim;
        const float* v = in.v(c) + t * in.row + h * c.v_dim;
        const double decay = std::exp(double(in.g[t * c.v_heads + h])), beta = in.beta[t * c.v_heads + h];
        for (int i = 0; i < c.k_dim * c.v_dim; ++i) s[i] *= decay;
        for (int j = 0; j < c.v_dim; ++j) {
          double pred = 0;
          for (int i = 0; i < c.k_dim; ++i) pred += s[i * c.v_dim + j] * k[i];
          const double u = beta * (v[j] - pred);
          for (int i = 0; i < c.k_dim; ++i) s[i * c.v_dim + j] += double(k[i]) * u;
        }
        for (int j = 0; j < c.v_dim; ++j) {
          double o = 0;
          for (int i = 0; i < c.k_dim; ++i) o += s[i * c.v_dim + j] * c.scale() * q[i];
          out[(t * c.v_heads + h) * c.v_dim + j] = o;
        }
      }
    }
    return out;
  }
};

TokenBatch batch_of(std::initializer_list<std::tuple<int32_t, int32_t, int32_t>> seqs) {
  TokenBatch tb;
  for (auto [slot, pos0, n] : seqs) tb.add(slot, pos0, n);
  return tb;
}

} // namespace

// Each form against the oracle over calls that cross 64-token chunk edges (63, 64, 65, 130,
// 200), mix sequences in one call, and carry state between calls.
TEST(GatedDeltaRuleOp, BothFormsMatchTheDoubleOracle) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("gated_delta_rule oracle");
  const Cfg c;
  const std::vector<TokenBatch> calls = {
      batch_of({{1, 0, 130}}),
      batch_of({{1, 130, 63}, {0, 0, 64}, {2, 0, 2}}),
      batch_of({{0, 64, 65}, {2, 2, 200}}),
      batch_of({{1, 193, 1}, {0, 129, 1}, {2, 202, 1}}),
  };
  std::vector<CallInputs> inputs;
  for (const auto& tb : calls) inputs.emplace_back(c, tb.tokens(), rng);
  for (const std::string variant : {"chunked64", "recurrent"}) {
    Oracle oracle(c);
    std::vector<float> state(c.state_elems(), 0.f);
    for (size_t i = 0; i < calls.size(); ++i) {
      // The chunked form is for multi-token sequences; decode steps go where the planner sends them.
      const bool decode = calls[i].max_seq_tokens() == 1;
      const auto got = run_gdr(be, c, inputs[i], calls[i], state, decode ? "" : variant);
      const Mismatch m = compare(got, oracle.run(inputs[i], calls[i]), kFloat32Exact);
      EXPECT_TRUE(m.ok) << variant << " call " << i << ": " << m.describe();
    }
    const Mismatch ms = compare(state, oracle.S, kFloat32Exact);
    EXPECT_TRUE(ms.ok) << variant << " final state: " << ms.describe();
  }
}

// Prefill (chunked, in uneven calls) and decode (recurrent, one token per call) of the same
// sequence agree on every output and on the state they leave.
TEST(GatedDeltaRuleOp, ChunkedPrefillAgreesWithTokenByTokenDecode) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("gated_delta_rule chunked vs recurrent");
  const Cfg c;
  const int32_t total = 337;
  const CallInputs all(c, total, rng);
  std::vector<float> s_chunked(c.state_elems(), 0.f), s_recurrent(c.state_elems(), 0.f);

  // Slices [b, e) of the sequence as a call of their own.
  auto slice = [&](int32_t b, int32_t e) {
    CallInputs part = all;
    part.T = e - b;
    part.qkv.assign(all.qkv.begin() + b * all.row, all.qkv.begin() + e * all.row);
    part.g.assign(all.g.begin() + b * c.v_heads, all.g.begin() + e * c.v_heads);
    part.beta.assign(all.beta.begin() + b * c.v_heads, all.beta.begin() + e * c.v_heads);
    return part;
  };
  std::vector<float> out_chunked, out_recurrent;
  for (auto [b, e] : {std::pair{0, 100}, {100, 137}, {137, 337}}) {
    const auto o = run_gdr(be, c, slice(b, e), batch_of({{2, b, e - b}}), s_chunked, "chunked64");
    out_chunked.insert(out_chunked.end(), o.begin(), o.end());
  }
  for (int32_t t = 0; t < total; ++t) {
    const auto o = run_gdr(be, c, slice(t, t + 1), batch_of({{2, t, 1}}), s_recurrent, "recurrent");
    out_recurrent.insert(out_recurrent.end(), o.begin(), o.end());
  }
  const Mismatch m = compare(out_chunked, widen(out_recurrent), kFloat32Exact);
  EXPECT_TRUE(m.ok) << "outputs: " << m.describe();
  const Mismatch ms = compare(s_chunked, widen(s_recurrent), kFloat32Exact);
  EXPECT_TRUE(ms.ok) << "states: " << ms.describe();
}

// Model code never names a form: the planner sends decode steps to the recurrent form and
// anything with a multi-token sequence to the chunked one.
TEST(GatedDeltaRuleOp, PlannerRoutesDecodeToRecurrentAndPrefillToChunked) {
  Backend be = cpu_backend();
  EXPECT_EQ(be.plan(NINFER_OP_GATED_DELTA_RULE, {8, {1, 48, 128, 128}, NINFER_DTYPE_F32}).variant, "recurrent");
  EXPECT_EQ(be.plan(NINFER_OP_GATED_DELTA_RULE, {2, {2, 48, 128, 128}, NINFER_DTYPE_F32}).variant, "chunked64");
  EXPECT_EQ(be.plan(NINFER_OP_GATED_DELTA_RULE, {700, {700, 48, 128, 128}, NINFER_DTYPE_F32}).variant, "chunked64");
}

// Speculative verification (NINFER_SHAPE_TOKEN_STATES): the op also writes the state after every
// token, each equal to the oracle's state at that token, over a call of three sequences of 4
// tokens that continue states left by an earlier call; the slots still end at their last token.
// The chunked form cannot keep them and refuses the flag, so the planner takes the recurrent one.
TEST(GatedDeltaRuleOp, TokenStatesAreTheStateAfterEveryToken) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("gated_delta_rule token states");
  const Cfg c;
  const size_t per = size_t(c.v_heads) * c.k_dim * c.v_dim;
  Oracle oracle(c);
  std::vector<float> state(c.state_elems(), 0.f);
  const TokenBatch first = batch_of({{0, 0, 9}, {2, 0, 70}, {1, 0, 3}});
  const CallInputs in0(c, first.tokens(), rng);
  run_gdr(be, c, in0, first, state, "");
  oracle.run(in0, first);

  const TokenBatch tb = batch_of({{2, 70, 4}, {0, 9, 4}, {1, 3, 4}});
  const CallInputs in(c, tb.tokens(), rng);
  const int64_t os = int64_t{c.v_heads} * c.v_dim;
  auto out = poisoned(in.T * os);
  auto token_states = poisoned(size_t(in.T) * per);
  ninfer_gated_delta_rule_args a{in.q(),       in.k(c),    in.row,      in.v(c),   in.row,    in.g.data(),
                                 in.beta.data(), state.data(), out.data(), os,        tb.batch(), in.T,
                                 c.k_heads,    c.v_heads,  c.k_dim,     c.v_dim,   c.scale(), token_states.data()};
  ninfer_shape s{in.T, {tb.max_seq_tokens(), c.v_heads, c.k_dim, c.v_dim}, NINFER_DTYPE_F32};
  s.flags = NINFER_SHAPE_TOKEN_STATES;
  EXPECT_EQ(be.plan(NINFER_OP_GATED_DELTA_RULE, s).variant, "recurrent");
  EXPECT_THROW(be.run_variant(NINFER_OP_GATED_DELTA_RULE, "chunked64", s, &a), Error);
  be.reserve_workspace(NINFER_OP_GATED_DELTA_RULE, s);
  be.run(NINFER_OP_GATED_DELTA_RULE, s, &a);

  // The oracle one token at a time, so its state after each token can be read.
  std::vector<double> want_states, want_out;
  for (int64_t t = 0; t < in.T; ++t) {
    CallInputs one = in;
    one.T = 1;
    one.qkv.assign(in.qkv.begin() + t * in.row, in.qkv.begin() + (t + 1) * in.row);
    one.g.assign(in.g.begin() + t * c.v_heads, in.g.begin() + (t + 1) * c.v_heads);
    one.beta.assign(in.beta.begin() + t * c.v_heads, in.beta.begin() + (t + 1) * c.v_heads);
    const int32_t slot = tb.seq_slot[tb.token_seq[t]];
    const auto o = oracle.run(one, batch_of({{slot, tb.token_pos[t], 1}}));
    want_out.insert(want_out.end(), o.begin(), o.end());
    want_states.insert(want_states.end(), oracle.S.begin() + slot * per, oracle.S.begin() + (slot + 1) * per);
  }
  const Mismatch mo = compare(out, want_out, kFloat32Exact);
  EXPECT_TRUE(mo.ok) << "outputs: " << mo.describe();
  const Mismatch mt = compare(token_states, want_states, kFloat32Exact);
  EXPECT_TRUE(mt.ok) << "token states: " << mt.describe();
  const Mismatch ms = compare(state, oracle.S, kFloat32Exact);
  EXPECT_TRUE(ms.ok) << "final states: " << ms.describe();
}
