// The fused Gated DeltaNet decode ops on the CUDA plugin against the CPU reference plugin:
// conv_l2_norm (causal conv + SiLU, then the L2 norm of the q and k heads) and gated_delta_step
// (gating from the raw a and b projections, one delta-rule step, the gated output norm), both
// "decode" variants of kernels/gated_deltanet/conv_l2_norm.cu and
// kernels/gated_deltanet/gated_delta_step.cu.
//
// Each test runs a scenario of calls that carries state across them: a batch of four sequences
// whose slots are not in sequence order, then one sequence, then three, then four in slot
// order, from a random initial state (so the first call already reads it). The decode scenario
// gives every sequence one token; the verification scenario gives them a speculative round's
// tokens (up to 8, the variants' limit, of different counts in one call) and keeps the state
// after every token (token states), compared like the slots' state. Inputs are
// fresh and random and laid out as the model passes them: the conv reads rows inside a wider
// projection row, the step reads q, k and v inside the conv's output rows and a, b and z inside
// the projection row. Outputs are NaN-poisoned before every call, their row padding must stay
// NaN, and after every call the whole state buffer (all slots, also those the call did not
// name) is compared. The planner's choice and every variant forced run the same scenario.
//
// GdnDecodePlan needs no GPU: on every described card this build has a plugin for, decode
// and verification shapes plan to "decode", and the shapes the variants decline (prompts, heads
// other than 128 x 128) have no CUDA plan at all, which is what sends the model to the unfused
// ops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "described_cards.hpp"
#include "gpu_op_env.hpp"
#include "ninfer/abi/ops/conv_l2_norm.h"
#include "ninfer/abi/ops/gated_delta_step.h"
#include "ninfer/devices/arch_catalog.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/planning/planner.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/planning/schedule_table.hpp"
#include "op_routes.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

constexpr int32_t kSlots = 4;
constexpr float kEps = 1e-6f;

// GPU float32 against the CPU plugin's double accumulation. The conv's outputs are sums of
// `kernel` products and a SiLU (float32 rounding ~1e-7 relative), normed heads scaled by a
// float32 rsqrt; the delta rule's state and outputs are 128-term float32 sums of O(1) values
// whose rounding stays near 1e-6, and the output norm is scale-invariant, so it does not
// amplify it. Both bounds leave an order of magnitude and more, while a wrong head, slot or
// state entry is off by O(1).
constexpr Tolerance kConvNormF32{"conv-l2-norm-f32-vs-double", 1e-5, 1e-4};
constexpr Tolerance kStepF32{"gdn-step-f32-vs-double", 1e-4, 1e-4};

// A Gated DeltaNet layer's decode shapes. The conv's channels are q | k | v; the normed heads
// are the 2 * k_heads heads of q and k.
struct GdnShape {
  const char* name;
  int32_t k_heads, v_heads, k_dim, v_dim, kernel;
  int32_t channels() const { return 2 * k_heads * k_dim + v_heads * v_dim; }
  int32_t norm_heads() const { return 2 * k_heads; }
  // The input projection row as GatedDeltaNetBlock lays it out: q | k | v | z | a | b, then 5
  // floats of padding.
  int64_t proj_row() const { return channels() + int64_t{v_heads} * v_dim + 2 * v_heads + 5; }
  int64_t z_at() const { return channels(); }
  int64_t a_at() const { return z_at() + int64_t{v_heads} * v_dim; }
  int64_t b_at() const { return a_at() + v_heads; }
  int64_t conv_out_row() const { return channels() + 3; }
  int64_t step_out_row() const { return int64_t{v_heads} * v_dim + 7; }
  size_t conv_state_elems() const { return static_cast<size_t>(kSlots) * channels() * (kernel - 1); }
  size_t step_state_elems() const { return static_cast<size_t>(kSlots) * v_heads * k_dim * v_dim; }
};

// gtest names a failing parameter by this, not by its bytes.
void PrintTo(const GdnShape& g, std::ostream* os) { *os << g.name; }

const GdnShape kShapes[] = {
    {"Qwen35_27B_16k_48v_heads_of_128", 16, 48, 128, 128, 4},
    {"small_2k_4v_heads_of_128", 2, 4, 128, 128, 4},
};

// One call: sequence i in slot slots[i] with counts[i] tokens (one each when counts is empty: a
// decode step); keep_states asks for the state after every token.
struct DecodeBatch {
  std::vector<int32_t> seq_start{0}, seq_slot, token_pos, token_seq;
  std::string text;
  int32_t max_seq_tokens = 0;
  bool keep_states = false;
  DecodeBatch(const std::vector<int32_t>& slots, std::vector<int32_t>& next_pos,
              const std::vector<int32_t>& counts = {}) {
    for (size_t i = 0; i < slots.size(); ++i) {
      const int32_t s = slots[i], n = counts.empty() ? 1 : counts[i];
      for (int32_t j = 0; j < n; ++j) {
        token_seq.push_back(static_cast<int32_t>(seq_slot.size()));
        token_pos.push_back(next_pos[s]++);
      }
      seq_slot.push_back(s);
      seq_start.push_back(seq_start.back() + n);
      max_seq_tokens = std::max(max_seq_tokens, n);
      text += (text.empty() ? "slots " : ", ") + std::to_string(s) + (n > 1 ? " x" + std::to_string(n) : "");
    }
    keep_states = !counts.empty();
  }
  int64_t tokens() const { return static_cast<int64_t>(token_seq.size()); }
};

const std::vector<std::vector<int32_t>> kScenarioSlots = {{2, 0, 3, 1}, {1}, {3, 0, 2}, {0, 1, 2, 3}};

std::vector<DecodeBatch> scenario() {
  std::vector<int32_t> next_pos(kSlots, 5); // the sequences are already 5 tokens in
  std::vector<DecodeBatch> out;
  for (const std::vector<int32_t>& slots : kScenarioSlots) out.emplace_back(slots, next_pos);
  return out;
}

// Verification passes: rounds of 3 drafts (4 tokens a sequence), then one sequence of 2, then
// mixed counts up to the variants' limit of 8 tokens.
std::vector<DecodeBatch> verification_scenario() {
  std::vector<int32_t> next_pos(kSlots, 5);
  const std::vector<std::vector<int32_t>> counts = {{4, 4, 4, 4}, {2}, {1, 8, 3}, {4, 6, 2, 4}};
  std::vector<DecodeBatch> out;
  for (size_t i = 0; i < counts.size(); ++i) out.emplace_back(kScenarioSlots[i], next_pos, counts[i]);
  return out;
}

// A batch's arrays on one backend (device memory on the CUDA one).
struct BatchOn {
  DeviceBuffer seq_start, seq_slot, token_pos, token_seq;
  ninfer_token_batch tb{};
  BatchOn(Backend& be, const DecodeBatch& b)
      : seq_start(put(be, b.seq_start, "seq_start")), seq_slot(put(be, b.seq_slot, "seq_slot")),
        token_pos(put(be, b.token_pos, "token_pos")), token_seq(put(be, b.token_seq, "token_seq")) {
    tb = {static_cast<int32_t>(b.seq_slot.size()), seq_start.as<int32_t>(), seq_slot.as<int32_t>(),
          token_pos.as<int32_t>(), token_seq.as<int32_t>()};
  }
};

// What one call left: the rows it wrote, whether it wrote their padding, the whole state, and
// the token states when the call kept them.
struct CallResult {
  std::vector<float> out, state, token_states;
  bool padding_clean = true;
  std::string variant;
};

bool has_nan(const std::vector<float>& v) {
  for (float x : v)
    if (std::isnan(x)) return true;
  return false;
}

// Runs `op` by `route` with the workspace the plan needs (the CPU reference may use one).
std::string run_call(Backend& be, const char* op, const std::string& route, const ninfer_shape& s,
                     const void* args) {
  be.reserve_workspace(op, s);
  run_route(be, op, route, s, args);
  return route.empty() ? be.plan(op, s).variant : route;
}

// ---- conv_l2_norm ---------------------------------------------------------------------------

struct ConvInputs {
  std::vector<float> weight, state0;
  std::vector<std::vector<float>> proj; // per call: [tokens, proj_row]
  ConvInputs(const GdnShape& g, const std::vector<DecodeBatch>& calls, std::mt19937_64& rng) {
    weight = randn(rng, static_cast<size_t>(g.channels()) * g.kernel, 0.7f);
    state0 = randn(rng, g.conv_state_elems(), 2.f);
    for (const DecodeBatch& b : calls) proj.push_back(randn(rng, static_cast<size_t>(b.tokens() * g.proj_row()), 2.f));
  }
};

std::vector<CallResult> run_conv(Backend& be, const GdnShape& g, const std::vector<DecodeBatch>& calls,
                                 const ConvInputs& in, const std::string& route) {
  const DeviceBuffer w = put(be, in.weight, "conv weight");
  const DeviceBuffer state = put(be, in.state0, "conv state");
  std::vector<CallResult> res;
  for (size_t i = 0; i < calls.size(); ++i) {
    const DecodeBatch& b = calls[i];
    const int64_t T = b.tokens();
    const BatchOn tb(be, b);
    const DeviceBuffer proj = put(be, in.proj[i], "projection rows");
    const DeviceBuffer out = poisoned_buffer(be, static_cast<size_t>(T * g.conv_out_row()), "conv out");
    const size_t kept = b.keep_states ? static_cast<size_t>(T) * g.channels() * (g.kernel - 1) : 0;
    const DeviceBuffer token_states = poisoned_buffer(be, std::max<size_t>(kept, 1), "conv token states");
    const ninfer_conv_l2_norm_args a{{proj.as<float>(), g.proj_row(), w.as<float>(), state.as<float>(),
                                      out.as<float>(), g.conv_out_row(), tb.tb, T, g.channels(), g.kernel,
                                      kept ? token_states.as<float>() : nullptr},
                                     g.norm_heads(),
                                     g.k_dim,
                                     kEps};
    ninfer_shape s{T, {g.channels(), g.kernel, b.max_seq_tokens, g.k_dim}, NINFER_DTYPE_F32};
    s.flags = kept ? NINFER_SHAPE_TOKEN_STATES : 0u;
    CallResult r;
    r.variant = run_call(be, NINFER_OP_CONV_L2_NORM, route, s, &a);
    const std::vector<float> o = get<float>(be, out, static_cast<size_t>(T * g.conv_out_row()));
    r.out = row_elements(o, T, g.channels(), g.conv_out_row());
    r.padding_clean = padding_still_poisoned(o, T, g.channels(), g.conv_out_row());
    r.state = get<float>(be, state, g.conv_state_elems());
    if (kept) r.token_states = get<float>(be, token_states, kept);
    res.push_back(std::move(r));
  }
  return res;
}

class GdnDecodeConvL2Norm : public ::testing::TestWithParam<GdnShape> {};

void check_conv_scenario(const GdnShape& g, const std::vector<DecodeBatch>& calls, const char* seed) {
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  auto rng = fresh_rng(seed);
  const ConvInputs in(g, calls, rng);
  const std::vector<CallResult> ref = run_conv(*cpu, g, calls, in, "");
  for (const std::string& route : op_routes(*gpu, NINFER_OP_CONV_L2_NORM)) {
    const std::vector<CallResult> got = run_conv(*gpu, g, calls, in, route);
    for (size_t i = 0; i < calls.size(); ++i) {
      SCOPED_TRACE(testing::Message() << g.name << ", " << route_name(route) << " (ran " << got[i].variant
                                      << "), call " << i << ": " << calls[i].text);
      ASSERT_FALSE(has_nan(ref[i].out)) << "the CPU reference left NaN";
      EXPECT_EQ(got[i].variant, "decode");
      const Mismatch m = compare(got[i].out, widen(ref[i].out), kConvNormF32);
      EXPECT_TRUE(m.ok) << "out: " << m.describe();
      EXPECT_TRUE(got[i].padding_clean) << "wrote into the row padding";
      // The new state is the last kernel-1 inputs: copies, not arithmetic.
      const Mismatch ms = compare(got[i].state, widen(ref[i].state), kExactCopy);
      EXPECT_TRUE(ms.ok) << "state: " << ms.describe();
      ASSERT_EQ(got[i].token_states.size(), ref[i].token_states.size());
      const Mismatch mt = compare(got[i].token_states, widen(ref[i].token_states), kExactCopy);
      EXPECT_TRUE(mt.ok) << "token states: " << mt.describe();
    }
  }
}

TEST_P(GdnDecodeConvL2Norm, EveryRouteMatchesTheCpuReferenceWithStateAcrossCalls) {
  NINFER_REQUIRE_CUDA_BACKEND();
  check_conv_scenario(GetParam(), scenario(), "gpu conv_l2_norm decode");
}

TEST_P(GdnDecodeConvL2Norm, VerificationPassesWalkTheirTokensAsTheCpuReference) {
  NINFER_REQUIRE_CUDA_BACKEND();
  check_conv_scenario(GetParam(), verification_scenario(), "gpu conv_l2_norm verification");
}

INSTANTIATE_TEST_SUITE_P(Shapes, GdnDecodeConvL2Norm, ::testing::ValuesIn(kShapes),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- gated_delta_step -----------------------------------------------------------------------

// Per call: the conv output rows (q and k L2-normalised per head, as conv_l2_norm leaves them)
// and the projection rows (z, a, b). Per layer: a_log, dt_bias, norm_w. A few value heads get
// a + dt_bias above softplus' threshold of 20 (decay ~0: the state is forgotten).
struct StepInputs {
  std::vector<float> a_log, dt_bias, norm_w, state0;
  std::vector<std::vector<float>> qkv, proj;
  StepInputs(const GdnShape& g, const std::vector<DecodeBatch>& calls, std::mt19937_64& rng) {
    a_log = randn(rng, static_cast<size_t>(g.v_heads), 0.5f);
    dt_bias = randn(rng, static_cast<size_t>(g.v_heads));
    norm_w = randn(rng, static_cast<size_t>(g.v_dim), 0.1f);
    for (float& w : norm_w) w += 1.f;
    state0 = randn(rng, g.step_state_elems(), 0.3f);
    std::uniform_real_distribution<float> above_threshold(21.f, 30.f);
    for (const DecodeBatch& b : calls) {
      const int64_t T = b.tokens();
      std::vector<float> rows = randn(rng, static_cast<size_t>(T * g.conv_out_row()));
      for (int64_t t = 0; t < T; ++t)
        for (int h = 0; h < g.norm_heads(); ++h) {
          float* r = &rows[static_cast<size_t>(t * g.conv_out_row() + int64_t{h} * g.k_dim)];
          double ss = 0;
          for (int i = 0; i < g.k_dim; ++i) ss += double(r[i]) * r[i];
          for (int i = 0; i < g.k_dim; ++i) r[i] = static_cast<float>(r[i] / std::sqrt(ss + kEps));
        }
      qkv.push_back(std::move(rows));
      std::vector<float> p = randn(rng, static_cast<size_t>(T * g.proj_row()), 1.5f);
      for (int64_t t = 0; t < T; ++t)
        for (int h = 3; h < g.v_heads; h += 7) p[static_cast<size_t>(t * g.proj_row() + g.a_at() + h)] = above_threshold(rng);
      proj.push_back(std::move(p));
    }
  }
};

std::vector<CallResult> run_step(Backend& be, const GdnShape& g, const std::vector<DecodeBatch>& calls,
                                 const StepInputs& in, const std::string& route) {
  const DeviceBuffer a_log = put(be, in.a_log, "A_log"), dt_bias = put(be, in.dt_bias, "dt_bias"),
                     norm_w = put(be, in.norm_w, "norm weight");
  const DeviceBuffer state = put(be, in.state0, "recurrent state");
  std::vector<CallResult> res;
  for (size_t i = 0; i < calls.size(); ++i) {
    const DecodeBatch& b = calls[i];
    const int64_t T = b.tokens();
    const BatchOn tb(be, b);
    const DeviceBuffer qkv = put(be, in.qkv[i], "conv out rows");
    const DeviceBuffer proj = put(be, in.proj[i], "projection rows");
    const DeviceBuffer out = poisoned_buffer(be, static_cast<size_t>(T * g.step_out_row()), "step out");
    const float* q = qkv.as<float>();
    const float* p = proj.as<float>();
    ninfer_gated_delta_step_args a{};
    a.q = q;
    a.k = q + int64_t{g.k_heads} * g.k_dim;
    a.qk_token_stride = g.conv_out_row();
    a.v = q + 2 * int64_t{g.k_heads} * g.k_dim;
    a.v_token_stride = g.conv_out_row();
    a.a = p + g.a_at();
    a.b = p + g.b_at();
    a.ab_token_stride = g.proj_row();
    a.a_log = a_log.as<float>();
    a.dt_bias = dt_bias.as<float>();
    a.z = p + g.z_at();
    a.z_token_stride = g.proj_row();
    a.norm_w = norm_w.as<float>();
    a.eps = kEps;
    a.scale = 1.f / std::sqrt(static_cast<float>(g.k_dim));
    a.state = state.as<float>();
    a.out = out.as<float>();
    a.out_token_stride = g.step_out_row();
    a.batch = tb.tb;
    a.tokens = T;
    a.k_heads = g.k_heads;
    a.v_heads = g.v_heads;
    a.k_dim = g.k_dim;
    a.v_dim = g.v_dim;
    const size_t kept = b.keep_states ? static_cast<size_t>(T) * g.v_heads * g.k_dim * g.v_dim : 0;
    const DeviceBuffer token_states = poisoned_buffer(be, std::max<size_t>(kept, 1), "step token states");
    a.token_states = kept ? token_states.as<float>() : nullptr;
    ninfer_shape s{T, {g.v_heads, g.k_dim, g.v_dim, g.k_heads}, NINFER_DTYPE_F32};
    s.max_seq_tokens = b.max_seq_tokens;
    s.flags = kept ? NINFER_SHAPE_TOKEN_STATES : 0u;
    CallResult r;
    r.variant = run_call(be, NINFER_OP_GATED_DELTA_STEP, route, s, &a);
    const int64_t width = int64_t{g.v_heads} * g.v_dim;
    const std::vector<float> o = get<float>(be, out, static_cast<size_t>(T * g.step_out_row()));
    r.out = row_elements(o, T, width, g.step_out_row());
    r.padding_clean = padding_still_poisoned(o, T, width, g.step_out_row());
    r.state = get<float>(be, state, g.step_state_elems());
    if (kept) r.token_states = get<float>(be, token_states, kept);
    res.push_back(std::move(r));
  }
  return res;
}

class GdnDecodeStep : public ::testing::TestWithParam<GdnShape> {};

void check_step_scenario(const GdnShape& g, const std::vector<DecodeBatch>& calls, const char* seed) {
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  auto rng = fresh_rng(seed);
  const StepInputs in(g, calls, rng);
  const std::vector<CallResult> ref = run_step(*cpu, g, calls, in, "");
  for (const std::string& route : op_routes(*gpu, NINFER_OP_GATED_DELTA_STEP)) {
    const std::vector<CallResult> got = run_step(*gpu, g, calls, in, route);
    for (size_t i = 0; i < calls.size(); ++i) {
      SCOPED_TRACE(testing::Message() << g.name << ", " << route_name(route) << " (ran " << got[i].variant
                                      << "), call " << i << ": " << calls[i].text);
      ASSERT_FALSE(has_nan(ref[i].out) || has_nan(ref[i].state)) << "the CPU reference left NaN";
      EXPECT_EQ(got[i].variant, "decode");
      const Mismatch m = compare(got[i].out, widen(ref[i].out), kStepF32);
      EXPECT_TRUE(m.ok) << "out: " << m.describe();
      EXPECT_TRUE(got[i].padding_clean) << "wrote into the row padding";
      const Mismatch ms = compare(got[i].state, widen(ref[i].state), kStepF32);
      EXPECT_TRUE(ms.ok) << "state: " << ms.describe();
      ASSERT_EQ(got[i].token_states.size(), ref[i].token_states.size());
      const Mismatch mt = compare(got[i].token_states, widen(ref[i].token_states), kStepF32);
      EXPECT_TRUE(mt.ok) << "token states: " << mt.describe();
    }
  }
}

TEST_P(GdnDecodeStep, EveryRouteMatchesTheCpuReferenceWithStateAcrossCalls) {
  NINFER_REQUIRE_CUDA_BACKEND();
  check_step_scenario(GetParam(), scenario(), "gpu gated_delta_step decode");
}

TEST_P(GdnDecodeStep, VerificationPassesWalkTheirTokensAsTheCpuReference) {
  NINFER_REQUIRE_CUDA_BACKEND();
  check_step_scenario(GetParam(), verification_scenario(), "gpu gated_delta_step verification");
}

INSTANTIATE_TEST_SUITE_P(Shapes, GdnDecodeStep, ::testing::ValuesIn(kShapes),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- arguments the variants refuse ----------------------------------------------------------

// More normed channels than the conv has: refused at launch with a message, nothing computed.
TEST(GdnDecodeArgs, NormedHeadsBeyondTheChannelsAreRefused) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto gpu = make_cuda_backend();
  const GdnShape g = kShapes[1];
  std::vector<int32_t> next_pos(kSlots, 0);
  const DecodeBatch b({1}, next_pos);
  const BatchOn tb(*gpu, b);
  auto rng = fresh_rng("gpu conv_l2_norm bad heads");
  const DeviceBuffer x = put(*gpu, randn(rng, static_cast<size_t>(g.channels())));
  const DeviceBuffer w = put(*gpu, randn(rng, static_cast<size_t>(g.channels()) * g.kernel));
  const DeviceBuffer state = put(*gpu, std::vector<float>(g.conv_state_elems(), 0.f));
  const DeviceBuffer out = poisoned_buffer(*gpu, static_cast<size_t>(g.channels()));
  const int32_t too_many = g.channels() / g.k_dim + 1;
  const ninfer_conv_l2_norm_args a{{x.as<float>(), g.channels(), w.as<float>(), state.as<float>(), out.as<float>(),
                                    g.channels(), tb.tb, 1, g.channels(), g.kernel},
                                   too_many,
                                   g.k_dim,
                                   kEps};
  const ninfer_shape s{1, {g.channels(), g.kernel, 1, g.k_dim}, NINFER_DTYPE_F32};
  try {
    gpu->run(NINFER_OP_CONV_L2_NORM, s, &a);
    ADD_FAILURE() << too_many << " heads of " << g.k_dim << " over " << g.channels() << " channels ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceed the"), std::string::npos) << e.what();
  }
}

// ---- routing, without a GPU -----------------------------------------------------------------

TEST(GdnDecodePlan, DecodeAndVerificationShapesPlanToDecodeAndTheRestTakeTheUnfusedForm) {
  const std::vector<Card> cards = cards_with_plugins();
  if (cards.empty()) GTEST_SKIP() << "this build has no CUDA plugin for a described card";
  for (const Card& card : cards) {
    const LoadedPlugin* plugin = card.plugin;
    const ninfer_device_info& dev = card.dev;
    const ScheduleTable table = builtin_schedule_table(*plugin, dev); // what a Backend plans with
    const Planner planner(*plugin, dev, &table);
    const ninfer_variant* conv = plugin->find_variant(NINFER_OP_CONV_L2_NORM, "decode");
    const ninfer_variant* step = plugin->find_variant(NINFER_OP_GATED_DELTA_STEP, "decode");
    ASSERT_NE(conv, nullptr) << plugin->name();
    ASSERT_NE(step, nullptr) << plugin->name();
    for (int64_t T : {1, 4, 64, 512}) {
      SCOPED_TRACE(testing::Message() << dev.name << ", " << T << " one-token sequences");
      for (const GdnShape& g : kShapes) {
        const ninfer_shape cs{T, {g.channels(), g.kernel, 1, g.k_dim}, NINFER_DTYPE_F32};
        const Plan pc = planner.plan(NINFER_OP_CONV_L2_NORM, cs);
        EXPECT_EQ(pc.variant, "decode") << g.name << ": " << pc.reason;
        EXPECT_EQ(pc.source, "planner") << g.name << ": no schedule table names the fused ops";
        EXPECT_FALSE(pc.launches.empty()) << g.name;
        const ninfer_shape ss{T, {g.v_heads, g.k_dim, g.v_dim, g.k_heads}, NINFER_DTYPE_F32};
        const Plan ps = planner.plan(NINFER_OP_GATED_DELTA_STEP, ss);
        EXPECT_EQ(ps.variant, "decode") << g.name << ": " << ps.reason;
        EXPECT_EQ(ps.source, "planner") << g.name;
        EXPECT_FALSE(ps.launches.empty()) << g.name;
      }
      // Verification passes (up to 8 tokens of a sequence), token states kept, take the fused ops.
      for (int32_t seq_tokens : {2, 4, 8})
        for (const GdnShape& g : kShapes) {
          ninfer_shape cs{T * seq_tokens, {g.channels(), g.kernel, seq_tokens, g.k_dim}, NINFER_DTYPE_F32};
          cs.flags = NINFER_SHAPE_TOKEN_STATES;
          EXPECT_EQ(planner.plan(NINFER_OP_CONV_L2_NORM, cs).variant, "decode") << g.name << " x" << seq_tokens;
          ninfer_shape ss{T * seq_tokens, {g.v_heads, g.k_dim, g.v_dim, g.k_heads}, NINFER_DTYPE_F32};
          ss.max_seq_tokens = seq_tokens;
          ss.flags = NINFER_SHAPE_TOKEN_STATES;
          EXPECT_EQ(planner.plan(NINFER_OP_GATED_DELTA_STEP, ss).variant, "decode") << g.name << " x" << seq_tokens;
        }
      // Prompts (a sequence of 9+ tokens) and norm rows above 1024 go to causal_conv1d + l2_norm.
      for (const ninfer_shape& s : {ninfer_shape{T + 9, {10240, 4, 9, 128}, NINFER_DTYPE_F32},
                                    ninfer_shape{T * 64, {10240, 4, 64, 128}, NINFER_DTYPE_F32},
                                    ninfer_shape{T, {10240, 17, 1, 128}, NINFER_DTYPE_F32},
                                    ninfer_shape{T, {10240, 4, 1, 2048}, NINFER_DTYPE_F32}}) {
        EXPECT_FALSE(conv->supports(conv->ctx, &s)) << "dims " << s.dims[0] << " " << s.dims[1] << " " << s.dims[2] << " "
                                         << s.dims[3];
        EXPECT_TRUE(planner.plan(NINFER_OP_CONV_L2_NORM, s).unfused) << "the plugin has no variant: the ops it fuses";
      }
      // A prompt chunk (a sequence of 9+ tokens) is left to the unfused form, whose chunked rule
      // runs it in parallel.
      for (const GdnShape& g : kShapes) {
        ninfer_shape prompt{T + 9, {g.v_heads, g.k_dim, g.v_dim, g.k_heads}, NINFER_DTYPE_F32};
        prompt.max_seq_tokens = static_cast<int32_t>(T + 9);
        EXPECT_FALSE(step->supports(step->ctx, &prompt)) << g.name;
        EXPECT_TRUE(planner.plan(NINFER_OP_GATED_DELTA_STEP, prompt).unfused) << g.name;
      }
      // Heads other than 128 x 128, and value heads that are not a multiple of the key heads, go
      // to the unfused gdn_gating + gated_delta_rule + gated_rms_norm.
      for (const ninfer_shape& s : {ninfer_shape{T, {48, 64, 128, 16}, NINFER_DTYPE_F32},
                                    ninfer_shape{T, {48, 128, 64, 16}, NINFER_DTYPE_F32},
                                    ninfer_shape{T, {4, 64, 64, 2}, NINFER_DTYPE_F32},
                                    ninfer_shape{T, {3, 128, 128, 2}, NINFER_DTYPE_F32}}) {
        EXPECT_FALSE(step->supports(step->ctx, &s)) << "dims " << s.dims[0] << " " << s.dims[1] << " " << s.dims[2] << " "
                                         << s.dims[3];
        EXPECT_TRUE(planner.plan(NINFER_OP_GATED_DELTA_STEP, s).unfused) << "the plugin has no variant: the ops it fuses";
      }
    }
  }
}

} // namespace
