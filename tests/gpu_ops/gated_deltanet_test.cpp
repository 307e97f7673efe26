// causal_conv1d and gated_delta_rule on the CUDA plugin against the CPU reference plugin: the
// planner's choice (Backend::run) and every registered variant forced (Backend::run_variant),
// over one scenario of calls that carries conv and recurrent state across calls: a prompt
// prefilled in pieces (63 then 65 tokens), prompts of 64, 200 and 700 tokens, decode steps
// and batches, prefill mixed with decode tokens of other slots, sequences in any slot order,
// and calls whose sequences have many different lengths (1, 2, 5, 64, 127, 129, 130).
// Inputs are fresh and random; outputs are NaN-poisoned before every call, their row padding
// must stay NaN, and after every call the whole state buffer (all slots) is compared too.
//
// The CPU plugin's forms accumulate in double; the CUDA forms in float32, the chunked ones in
// another order (64-token chunks; chunked64_parallel through an explicit (I + A)^{-1} per
// chunk), so all are held to the GPU-vs-CPU float32 tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "described_cards.hpp"
#include "gpu_op_env.hpp"
#include "ninfer/abi/ops/causal_conv1d.h"
#include "ninfer/abi/ops/gated_delta_rule.h"
#include "ninfer/devices/arch_catalog.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/planning/occupancy.hpp"
#include "ninfer/planning/planner.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

constexpr int32_t kSlots = 4;

// n tokens of the sequence in `slot`, continuing where that slot's previous call stopped
// (every slot starts a new sequence from a zeroed state in the first call that names it).
struct Piece {
  int32_t slot, n;
};
using Call = std::vector<Piece>;

std::vector<Call> scenario() {
  return {
      {{1, 63}},                        // a prompt's first piece
      {{1, 65}, {0, 64}},               // that prompt continues while another starts
      {{1, 1}, {0, 1}},                 // decode steps of both
      {{2, 700}, {0, 1}},               // a long prompt with a decode token of another slot
      {{3, 200}, {1, 1}, {2, 1}},       // a prompt with decode tokens; slot order != sequence order
      {{0, 1}, {1, 1}, {2, 1}, {3, 1}}, // a decode batch
      {{3, 1}, {2, 1}, {1, 1}, {0, 1}},
      {{2, 1}},                         // one decode step
      {{0, 2}, {3, 1}},                 // a two-token sequence and a decode token
      {{2, 130}, {0, 1}, {3, 64}, {1, 2}}, // lengths 130, 1, 64 and 2 in one call
      {{1, 127}, {3, 129}, {0, 5}},     // multi-chunk sequences back to back, none a multiple of 64
  };
}

// Host arrays of one call's token batch.
struct Batch {
  std::vector<int32_t> seq_start{0}, seq_slot, token_pos, token_seq;
  int32_t longest = 0; // most tokens of one sequence: the planning shape's dims[0] for the delta rule
  std::string text;

  Batch(const Call& call, std::vector<int32_t>& next_pos) {
    for (const Piece& p : call) {
      for (int32_t i = 0; i < p.n; ++i) {
        token_pos.push_back(next_pos[p.slot] + i);
        token_seq.push_back(static_cast<int32_t>(seq_slot.size()));
      }
      text += (text.empty() ? "" : ", ") + std::to_string(p.n) + " tokens of slot " + std::to_string(p.slot) +
              " from position " + std::to_string(next_pos[p.slot]);
      next_pos[p.slot] += p.n;
      seq_slot.push_back(p.slot);
      seq_start.push_back(seq_start.back() + p.n);
      longest = std::max(longest, p.n);
    }
  }
  int64_t tokens() const { return static_cast<int64_t>(token_pos.size()); }
};

std::vector<Batch> scenario_batches() {
  std::vector<Batch> out;
  std::vector<int32_t> next_pos(kSlots, 0);
  for (const Call& c : scenario()) out.emplace_back(c, next_pos);
  return out;
}

// A batch's arrays on one backend (device memory on the CUDA one).
struct BatchOn {
  DeviceBuffer seq_start, seq_slot, token_pos, token_seq;
  ninfer_token_batch tb{};
  BatchOn(Backend& be, const Batch& b)
      : seq_start(put(be, b.seq_start, "seq_start")), seq_slot(put(be, b.seq_slot, "seq_slot")),
        token_pos(put(be, b.token_pos, "token_pos")), token_seq(put(be, b.token_seq, "token_seq")) {
    tb = {static_cast<int32_t>(b.seq_slot.size()), seq_start.as<int32_t>(), seq_slot.as<int32_t>(),
          token_pos.as<int32_t>(), token_seq.as<int32_t>()};
  }
};

// "" (the planner's choice) and every variant of `op` the backend's plugin registers.
std::vector<std::string> routes(const Backend& be, const char* op) {
  std::vector<std::string> out{""};
  for (const ninfer_variant* v : be.plugin().variants_for(op)) out.emplace_back(v->name);
  EXPECT_GT(out.size(), 1u) << be.plugin().name() << " registers no variant of " << op;
  return out;
}

std::string route_name(const std::string& r) { return r.empty() ? "planner's choice" : r; }

// Runs `op` by `route`; a forced variant that cannot compute this call's shape (the chunked
// form on a decode step) hands the call to the planner, so the state still carries.
// Returns the variant that ran.
std::string run_route(Backend& be, const char* op, const std::string& route, const ninfer_shape& s,
                      const void* args) {
  const ninfer_variant* v = route.empty() ? nullptr : be.plugin().find_variant(op, route);
  if (v && v->supports(v->ctx, &s)) {
    be.run_variant(op, route, s, args);
    return route;
  }
  be.reserve_workspace(op, s); // tests size the workspace per call; models do it once at load
  be.run(op, s, args);
  return be.plan(op, s).variant;
}

// Elements [0, width) of T rows `stride` apart, and how many padding elements were written.
struct Rows {
  std::vector<float> values;
  int64_t padding_written = 0;
};

Rows rows_of(const std::vector<float>& buf, int64_t T, int64_t width, int64_t stride) {
  Rows r;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < stride; ++i) {
      const float x = buf[static_cast<size_t>(t * stride + i)];
      if (i < width) r.values.push_back(x);
      else if (!std::isnan(x)) ++r.padding_written;
    }
  return r;
}

bool has_nan(const std::vector<float>& v) {
  for (float x : v)
    if (std::isnan(x)) return true;
  return false;
}

// ---- causal_conv1d ------------------------------------------------------------------------

// Row layout: x rows are channels + x_pad floats apart and start x_offset floats into their
// buffer, out rows channels + out_pad apart. The default (7, 3, 0) makes every row start off a
// 16-byte boundary, so "rows" takes its 4-byte path throughout; pads that make both strides a
// multiple of 4 with x_offset 0 give it 16-byte rows (its float4 path, and with channels % 4 != 0
// the 4-byte path for the last channels only); x_offset 1 with such strides leaves the pointer
// unaligned, which must send it back to the 4-byte path.
struct ConvConfig {
  const char* name;
  int32_t channels, kernel;
  int32_t x_pad = 7, out_pad = 3, x_offset = 0;
};

// The inputs of every call, drawn once.
struct ConvCase {
  ConvConfig c;
  int64_t x_stride, out_stride;
  std::vector<float> weight;
  std::vector<std::vector<float>> x; // per call, x_offset floats of padding first
  ConvCase(const ConvConfig& cfg, const std::vector<Batch>& batches, std::mt19937_64& rng)
      : c(cfg), x_stride(cfg.channels + cfg.x_pad), out_stride(cfg.channels + cfg.out_pad) {
    weight = randn(rng, static_cast<size_t>(c.channels) * c.kernel, 0.7f);
    for (const Batch& b : batches)
      x.push_back(randn(rng, static_cast<size_t>(c.x_offset + b.tokens() * x_stride), 2.f));
  }
  size_t state_elems() const { return static_cast<size_t>(kSlots) * c.channels * (c.kernel - 1); }
};

// The shared scenario and two calls of its own: a prompt of 1,500 tokens (47 of "rows"' 32-token
// tiles, 94 of "tiled"'s 16) with a decode token and a 37-token prompt behind it; then sequences
// of 31, 2, 33 and 3 tokens, so that a two-token sequence starts on a tile's last token (its
// first tokens, which read the old state, spill into the next tile), and a longer one ends a
// few tokens into the next tile.
std::vector<Batch> conv_scenario_batches() {
  std::vector<Call> calls = scenario();
  calls.push_back({{2, 1500}, {1, 1}, {3, 37}});
  calls.push_back({{0, 31}, {1, 2}, {2, 33}, {3, 3}});
  std::vector<Batch> out;
  std::vector<int32_t> next_pos(kSlots, 0);
  for (const Call& c : calls) out.emplace_back(c, next_pos);
  return out;
}

struct ConvResult {
  std::vector<float> out, state;
  int64_t padding_written = 0;
  std::string variant;
};

// Runs every call of the scenario by `route` from zeroed state; results per call.
std::vector<ConvResult> run_conv(Backend& be, const ConvCase& cc, const std::vector<Batch>& batches,
                                 const std::string& route) {
  const DeviceBuffer w = put(be, cc.weight, "conv weight");
  const DeviceBuffer state = put(be, std::vector<float>(std::max<size_t>(cc.state_elems(), 1), 0.f), "conv state");
  std::vector<ConvResult> res;
  for (size_t i = 0; i < batches.size(); ++i) {
    const Batch& b = batches[i];
    const int64_t T = b.tokens();
    const BatchOn tb(be, b);
    const DeviceBuffer x = put(be, cc.x[i], "conv x");
    const DeviceBuffer out = poisoned_buffer(be, static_cast<size_t>(T * cc.out_stride), "conv out");
    const ninfer_causal_conv1d_args a{x.as<float>() + cc.c.x_offset, cc.x_stride, w.as<float>(), state.as<float>(),
                                      out.as<float>(), cc.out_stride, tb.tb, T, cc.c.channels, cc.c.kernel};
    const ninfer_shape s{T, {cc.c.channels, cc.c.kernel, 0, 0}, NINFER_DTYPE_F32};
    ConvResult r;
    r.variant = run_route(be, NINFER_OP_CAUSAL_CONV1D, route, s, &a);
    const Rows rows = rows_of(get<float>(be, out, static_cast<size_t>(T * cc.out_stride)), T, cc.c.channels,
                              cc.out_stride);
    r.out = rows.values;
    r.padding_written = rows.padding_written;
    r.state = get<float>(be, state, cc.state_elems());
    res.push_back(std::move(r));
  }
  return res;
}

class GpuCausalConv1d : public ::testing::TestWithParam<ConvConfig> {};

TEST_P(GpuCausalConv1d, EveryRouteMatchesTheCpuReferenceWithStateAcrossCalls) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  auto rng = fresh_rng("gpu causal_conv1d");
  const std::vector<Batch> batches = conv_scenario_batches();
  const ConvCase cc(GetParam(), batches, rng);
  const std::vector<ConvResult> ref = run_conv(*cpu, cc, batches, "");
  for (const std::string& route : routes(*gpu, NINFER_OP_CAUSAL_CONV1D)) {
    const std::vector<ConvResult> got = run_conv(*gpu, cc, batches, route);
    for (size_t i = 0; i < batches.size(); ++i) {
      SCOPED_TRACE(testing::Message() << GetParam().name << ", " << route_name(route) << " (ran "
                                      << got[i].variant << "), call " << i << ": " << batches[i].text);
      ASSERT_FALSE(has_nan(ref[i].out)) << "the CPU reference left NaN: the test's batch is wrong";
      const Mismatch m = compare(got[i].out, widen(ref[i].out), kGpuVsCpuF32);
      EXPECT_TRUE(m.ok) << "out: " << m.describe();
      EXPECT_EQ(got[i].padding_written, 0) << "wrote into the row padding";
      const Mismatch ms = compare(got[i].state, widen(ref[i].state), kGpuVsCpuF32);
      EXPECT_TRUE(ms.ok) << "state: " << ms.describe();
    }
  }
}

// Unaligned rows (the default pads) and 16-byte rows ("aligned": both strides multiples of 4).
// "rows" has a register window for kernels 1..4 and a re-reading path above (5, 6, 16); 12290
// channels are 25 of its 512-channel blocks, more than its 20 channel slices, so CTAs take
// several items; 1003 and 12290 end in a partial group of 4 channels.
INSTANTIATE_TEST_SUITE_P(
    Shapes, GpuCausalConv1d,
    ::testing::Values(ConvConfig{"Qwen35_27B_10240ch_k4", 10240, 4}, ConvConfig{"odd_1003ch_k3", 1003, 3},
                      ConvConfig{"odd_333ch_k2", 333, 2}, ConvConfig{"k5_130ch", 130, 5}, ConvConfig{"k1_96ch", 96, 1},
                      ConvConfig{"Qwen35_27B_10240ch_k4_aligned", 10240, 4, 4, 4},
                      ConvConfig{"aligned_1003ch_k3", 1003, 3, 5, 9}, ConvConfig{"aligned_12290ch_k4", 12290, 4, 2, 6},
                      ConvConfig{"aligned_68ch_k2", 68, 2, 0, 4}, ConvConfig{"aligned_96ch_k1", 96, 1, 4, 4},
                      ConvConfig{"aligned_136ch_k6", 136, 6, 4, 4}, ConvConfig{"aligned_40ch_k16", 40, 16, 4, 4},
                      ConvConfig{"x_pointer_off_16B_512ch_k4", 512, 4, 4, 4, 1}),
    [](const auto& info) { return std::string(info.param.name); });

// ---- gated_delta_rule -----------------------------------------------------------------------

struct GdrConfig {
  const char* name;
  int32_t k_heads, v_heads, k_dim, v_dim;
  // Padding floats after each q | k | v row. 3 makes rows (and so q and k) not 16-byte aligned;
  // 0 with dims that are multiples of 4 lets the kernels take their 16-byte copy paths.
  int32_t row_pad = 3;
  float scale() const { return 1.f / std::sqrt(static_cast<float>(k_dim)); }
  size_t state_elems() const { return static_cast<size_t>(kSlots) * v_heads * k_dim * v_dim; }
  int64_t out_stride() const { return int64_t{v_heads} * v_dim + 5; }
};

// One call's inputs as Qwen3.5 lays them out: q | k | v side by side in a conv output row
// (plus the config's padding floats), q and k L2-normalised per head as the model feeds them. g is in
// log space: even value heads decay slowly (long memory, as trained models often have), odd
// ones fast; beta in (0, 1).
struct GdrInputs {
  int64_t T, row;
  std::vector<float> qkv, g, beta;
  GdrInputs(const GdrConfig& c, int64_t tokens, std::mt19937_64& rng) : T(tokens) {
    row = 2 * int64_t{c.k_heads} * c.k_dim + int64_t{c.v_heads} * c.v_dim + c.row_pad;
    qkv = randn(rng, static_cast<size_t>(T * row));
    for (int64_t t = 0; t < T; ++t)
      for (int part = 0; part < 2; ++part)
        for (int h = 0; h < c.k_heads; ++h) {
          float* r = &qkv[static_cast<size_t>(t * row + (part * c.k_heads + h) * c.k_dim)];
          double ss = 0;
          for (int i = 0; i < c.k_dim; ++i) ss += double(r[i]) * r[i];
          for (int i = 0; i < c.k_dim; ++i) r[i] = static_cast<float>(r[i] / std::sqrt(ss));
        }
    std::uniform_real_distribution<float> slow(-0.1f, -0.001f), fast(-3.f, -0.01f), bd(0.02f, 0.98f);
    g.resize(static_cast<size_t>(T * c.v_heads));
    beta.resize(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      g[i] = (i % c.v_heads) % 2 == 0 ? slow(rng) : fast(rng);
      beta[i] = bd(rng);
    }
  }
};

struct GdrResult {
  std::vector<float> out, state;
  int64_t padding_written = 0;
  std::string variant;
};

std::vector<GdrResult> run_gdr(Backend& be, const GdrConfig& c, const std::vector<Batch>& batches,
                               const std::vector<GdrInputs>& inputs, const std::string& route) {
  const DeviceBuffer state = put(be, std::vector<float>(c.state_elems(), 0.f), "recurrent state");
  std::vector<GdrResult> res;
  for (size_t i = 0; i < batches.size(); ++i) {
    const Batch& b = batches[i];
    const GdrInputs& in = inputs[i];
    const int64_t T = b.tokens();
    const BatchOn tb(be, b);
    const DeviceBuffer qkv = put(be, in.qkv, "qkv");
    const DeviceBuffer g = put(be, in.g, "g");
    const DeviceBuffer beta = put(be, in.beta, "beta");
    const DeviceBuffer out = poisoned_buffer(be, static_cast<size_t>(T * c.out_stride()), "delta rule out");
    const float* q = qkv.as<float>();
    const ninfer_gated_delta_rule_args a{q, q + c.k_heads * c.k_dim, in.row, q + 2 * c.k_heads * c.k_dim, in.row,
                                         g.as<float>(), beta.as<float>(), state.as<float>(), out.as<float>(),
                                         c.out_stride(), tb.tb, T, c.k_heads, c.v_heads, c.k_dim, c.v_dim,
                                         c.scale()};
    const ninfer_shape s{T, {b.longest, c.v_heads, c.k_dim, c.v_dim}, NINFER_DTYPE_F32};
    GdrResult r;
    r.variant = run_route(be, NINFER_OP_GATED_DELTA_RULE, route, s, &a);
    const Rows rows = rows_of(get<float>(be, out, static_cast<size_t>(T * c.out_stride())), T,
                              int64_t{c.v_heads} * c.v_dim, c.out_stride());
    r.out = rows.values;
    r.padding_written = rows.padding_written;
    r.state = get<float>(be, state, c.state_elems());
    res.push_back(std::move(r));
  }
  return res;
}

class GpuGatedDeltaRule : public ::testing::TestWithParam<GdrConfig> {};

TEST_P(GpuGatedDeltaRule, EveryRouteMatchesTheCpuReferenceWithStateAcrossCalls) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  const GdrConfig& c = GetParam();
  auto rng = fresh_rng("gpu gated_delta_rule");
  const std::vector<Batch> batches = scenario_batches();
  std::vector<GdrInputs> inputs;
  for (const Batch& b : batches) inputs.emplace_back(c, b.tokens(), rng);
  const std::vector<GdrResult> ref = run_gdr(*cpu, c, batches, inputs, "");
  std::map<std::string, int> forced_runs;
  for (const std::string& route : routes(*gpu, NINFER_OP_GATED_DELTA_RULE)) {
    const std::vector<GdrResult> got = run_gdr(*gpu, c, batches, inputs, route);
    for (size_t i = 0; i < batches.size(); ++i) {
      SCOPED_TRACE(testing::Message() << c.name << ", " << route_name(route) << " (ran " << got[i].variant
                                      << "), call " << i << ": " << batches[i].text);
      ASSERT_FALSE(has_nan(ref[i].out) || has_nan(ref[i].state)) << "the CPU reference left NaN";
      // The planner sends decode steps (one token per sequence) to the recurrent form and
      // calls with a longer sequence to the chunk-parallel one (head dims up to 128).
      if (route.empty())
        EXPECT_EQ(got[i].variant, batches[i].longest == 1 ? "recurrent" : "chunked64_parallel");
      if (!route.empty() && got[i].variant == route) ++forced_runs[route];
      const Mismatch m = compare(got[i].out, widen(ref[i].out), kGpuVsCpuF32);
      EXPECT_TRUE(m.ok) << "out: " << m.describe();
      EXPECT_EQ(got[i].padding_written, 0) << "wrote into the row padding";
      const Mismatch ms = compare(got[i].state, widen(ref[i].state), kGpuVsCpuF32);
      EXPECT_TRUE(ms.ok) << "state: " << ms.describe();
    }
  }
  // The recurrent form runs every call; each chunked form every call with a multi-token sequence.
  int multi_token_calls = 0;
  for (const Batch& b : batches) multi_token_calls += b.longest > 1 ? 1 : 0;
  EXPECT_EQ(forced_runs["recurrent"], static_cast<int>(batches.size()));
  EXPECT_EQ(forced_runs["chunked64"], multi_token_calls);
  EXPECT_EQ(forced_runs["chunked64_parallel"], multi_token_calls);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GpuGatedDeltaRule,
    ::testing::Values(GdrConfig{"Qwen35_small_2k_4v_heads_of_64", 2, 4, 64, 64},
                      GdrConfig{"uneven_1k_3v_heads_kdim24_vdim40", 1, 3, 24, 40},
                      GdrConfig{"padded_2k_4v_heads_kdim98_vdim72", 2, 4, 98, 72},
                      GdrConfig{"Qwen35_27B_16k_48v_heads_of_128", 16, 48, 128, 128},
                      GdrConfig{"aligned_rows_4v_heads_of_128", 2, 4, 128, 128, 0}),
    [](const auto& info) { return std::string(info.param.name); });

// A head mapping the contract does not allow is refused with a message, not computed.
TEST(GpuGatedDeltaRuleArgs, ValueHeadsNotAMultipleOfKeyHeadsAreRefused) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto gpu = make_cuda_backend();
  const GdrConfig c{"bad", 2, 3, 16, 16};
  std::vector<int32_t> next_pos(kSlots, 0);
  for (const Call& call : {Call{{0, 5}}, Call{{1, 1}}}) {
    const Batch b(call, next_pos);
    auto rng = fresh_rng("gpu gated_delta_rule bad heads");
    const GdrInputs in(c, b.tokens(), rng);
    const BatchOn tb(*gpu, b);
    const DeviceBuffer qkv = put(*gpu, in.qkv), g = put(*gpu, in.g), beta = put(*gpu, in.beta);
    const DeviceBuffer state = put(*gpu, std::vector<float>(c.state_elems(), 0.f));
    const DeviceBuffer out = poisoned_buffer(*gpu, static_cast<size_t>(b.tokens() * c.out_stride()));
    const float* q = qkv.as<float>();
    const ninfer_gated_delta_rule_args a{q, q + c.k_heads * c.k_dim, in.row, q + 2 * c.k_heads * c.k_dim, in.row, g.as<float>(), beta.as<float>(),
                                         state.as<float>(), out.as<float>(), c.out_stride(), tb.tb, b.tokens(),
                                         c.k_heads, c.v_heads, c.k_dim, c.v_dim, c.scale()};
    const ninfer_shape s{b.tokens(), {b.longest, c.v_heads, c.k_dim, c.v_dim}, NINFER_DTYPE_F32};
    try {
      gpu->reserve_workspace(NINFER_OP_GATED_DELTA_RULE, s);
      gpu->run(NINFER_OP_GATED_DELTA_RULE, s, &a);
      ADD_FAILURE() << "3 value heads over 2 key heads ran (" << b.text << ")";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not a multiple of k_heads"), std::string::npos) << e.what();
    }
  }
}

// Needs no GPU: on every described card this build has a plugin for, decode steps plan to the
// recurrent form and prefill to the chunk-parallel one whenever it can run (head dims up to
// 128, tiles in the card's shared memory: always for Qwen3.5's 128-wide heads), else to
// chunked64 where its tiles fit, else to the recurrent form, which fits everywhere.
// causal_conv1d always has a plan.
TEST(GpuGatedDeltaNetPlan, DecodeToRecurrentPrefillToChunkedOnEveryDescribedCard) {
  const std::vector<Card> cards = cards_with_plugins();
  if (cards.empty()) GTEST_SKIP() << "this build has no CUDA plugin for a described card";
  for (const Card& card : cards) {
    const LoadedPlugin* plugin = card.plugin;
    const ninfer_device_info& dev = card.dev;
    const Planner planner(*plugin, dev);
    const ninfer_variant* chunked = plugin->find_variant(NINFER_OP_GATED_DELTA_RULE, "chunked64");
    const ninfer_variant* parallel = plugin->find_variant(NINFER_OP_GATED_DELTA_RULE, "chunked64_parallel");
    ASSERT_NE(chunked, nullptr) << plugin->name();
    ASSERT_NE(parallel, nullptr) << plugin->name();
    ASSERT_NE(plugin->find_variant(NINFER_OP_GATED_DELTA_RULE, "recurrent"), nullptr) << plugin->name();
    for (int64_t dim : {64, 128, 256}) {
      for (int64_t T : {1, 8, 512}) {
        const Plan p = planner.plan(NINFER_OP_GATED_DELTA_RULE, {T, {1, 48, dim, dim}, NINFER_DTYPE_F32});
        EXPECT_EQ(p.variant, "recurrent") << dev.name << " decode of " << T << " sequences, head dim " << dim;
      }
      const ninfer_shape probe{64, {64, 48, dim, dim}, NINFER_DTYPE_F32};
      const bool fits = occupancy(chunked->resources, chunked->dynamic_smem_bytes(chunked->ctx, &probe), dev).blocks_per_sm > 0;
      const bool parallel_fits =
          parallel->supports(parallel->ctx, &probe) &&
          occupancy(parallel->resources, parallel->dynamic_smem_bytes(parallel->ctx, &probe), dev).blocks_per_sm > 0;
      if (dim <= 128) {
        EXPECT_TRUE(fits) << dev.name << ": the chunked form's tiles for head dim " << dim << " do not fit";
        EXPECT_TRUE(parallel_fits) << dev.name << ": the chunk-parallel form cannot run head dim " << dim;
      }
      const char* want = parallel_fits ? "chunked64_parallel" : fits ? "chunked64" : "recurrent";
      for (auto [T, longest] :
           {std::pair<int64_t, int64_t>{2, 2}, {64, 64}, {65, 65}, {70, 64}, {700, 700}, {4096, 4096}}) {
        const Plan p = planner.plan(NINFER_OP_GATED_DELTA_RULE, {T, {longest, 48, dim, dim}, NINFER_DTYPE_F32});
        EXPECT_EQ(p.variant, want) << dev.name << " prefill of " << T << " tokens (longest sequence " << longest
                                   << "), head dim " << dim << ": " << p.reason;
      }
    }
    for (int64_t T : {1, 17, 8192}) {
      const Plan p = planner.plan(NINFER_OP_CAUSAL_CONV1D, {T, {10240, 4, 0, 0}, NINFER_DTYPE_F32});
      EXPECT_FALSE(p.launches.empty()) << dev.name;
    }
  }
}

} // namespace
