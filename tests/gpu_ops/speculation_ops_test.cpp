// The ops of speculative rollback on the CUDA plugin against the CPU reference plugin on the same
// fresh random inputs (docs/ops.md, "Why a verification pass keeps every token's state"):
// copy_rows and draft_accept bit for bit; gated_delta_rule and causal_conv1d with token states,
// which the planner routes to the variants that write them (recurrent, tiled) while every other
// variant refuses the flag; and the fused decode ops, which take a verification pass whole.
#include <gtest/gtest.h>

#include <cstring>

#include "gpu_op_env.hpp"
#include "ninfer/abi/ops/causal_conv1d.h"
#include "ninfer/abi/ops/conv_l2_norm.h"
#include "ninfer/abi/ops/copy_rows.h"
#include "ninfer/abi/ops/draft_accept.h"
#include "ninfer/abi/ops/gated_delta_rule.h"
#include "ninfer/abi/ops/gated_delta_step.h"

using namespace ninfer;
using namespace ninfer::test;

namespace {

// Host arrays of a token batch of `seqs` sequences of `n` tokens each, in slots 2, 0, 1, ...
struct Batch {
  std::vector<int32_t> seq_start{0}, seq_slot, token_pos, token_seq;
  Batch(int32_t seqs, int32_t n, int32_t pos0) {
    for (int32_t i = 0; i < seqs; ++i) {
      seq_slot.push_back((i + 2) % seqs);
      for (int32_t j = 0; j < n; ++j) {
        token_pos.push_back(pos0 + j);
        token_seq.push_back(i);
      }
      seq_start.push_back(seq_start.back() + n);
    }
  }
  int64_t tokens() const { return static_cast<int64_t>(token_pos.size()); }
};

// The batch's arrays on a backend.
struct BatchOn {
  DeviceBuffer start, slot, pos, seq;
  ninfer_token_batch tb{};
  BatchOn(Backend& be, const Batch& b)
      : start(put(be, b.seq_start)), slot(put(be, b.seq_slot)), pos(put(be, b.token_pos)), seq(put(be, b.token_seq)) {
    tb = {static_cast<int32_t>(b.seq_slot.size()), start.as<int32_t>(), slot.as<int32_t>(), pos.as<int32_t>(),
          seq.as<int32_t>()};
  }
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Whether any registered variant of `op` that is not `writer` accepts the flagged shape.
std::string variants_accepting(const Backend& be, const char* op, const ninfer_shape& s, const std::string& writer) {
  std::string out;
  for (const ninfer_variant* v : be.plugin().variants_for(op))
    if (v->name != writer && (!v->supports || v->supports(v->ctx, &s))) out += std::string(" ") + v->name;
  return out;
}

} // namespace

// Gathers and scatters of rows with a width that is not a multiple of 4 words at an odd offset
// (the scalar path) and of state-sized rows (the vector path), indices on the device.
TEST(SpeculationOpsGpu, CopyRowsEqualsTheCpuPluginBitForBit) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  auto rng = fresh_rng("gpu copy_rows");
  for (const auto& [width, offset] : {std::pair<int64_t, int64_t>{7, 1}, {16384 + 8, 0}, {3 * 64 * 64, 4}}) {
    const int64_t stride = width + offset + 3, src_rows = 9, dst_rows = 6;
    const std::vector<float> src = randn(rng, static_cast<size_t>(src_rows * stride));
    const std::vector<int32_t> dst_index{5, 0, 3}, src_index{8, 2, 2};
    std::vector<float> results[2];
    int k = 0;
    for (Backend* be : {cpu.get(), gpu.get()}) {
      const DeviceBuffer s = put(*be, src), di = put(*be, dst_index), si = put(*be, src_index);
      const DeviceBuffer d = poisoned_buffer(*be, static_cast<size_t>(dst_rows * stride));
      const ninfer_copy_rows_args a{d.as<float>() + offset, stride, di.as<int32_t>(), s.as<float>() + offset,
                                    stride,                si.as<int32_t>(), 3, width};
      be->run(NINFER_OP_COPY_ROWS, {3, {width, 0, 0, 0}, NINFER_DTYPE_F32}, &a);
      results[k++] = get<float>(*be, d, static_cast<size_t>(dst_rows * stride));
    }
    // Untouched elements stay NaN on both (compared as bits).
    EXPECT_TRUE(same_bits(results[0], results[1])) << "width " << width << " offset " << offset;
  }
}

// One call over several buffer pairs (a round's settling of every recurrent layer): the
// state-sized rows of each pair, bit for bit, with the other rows of every buffer untouched.
TEST(SpeculationOpsGpu, CopyRowGroupsEqualTheCpuPluginBitForBit) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  auto rng = fresh_rng("gpu copy_rows groups");
  const int64_t width = 3 * 64 * 64 + 4, groups = 5, src_rows = 8, dst_rows = 4;
  std::vector<std::vector<float>> src;
  for (int64_t g = 0; g < groups; ++g) src.push_back(randn(rng, static_cast<size_t>(src_rows * width)));
  const std::vector<int32_t> dst_index{3, 1}, src_index{7, 2};
  std::vector<std::vector<float>> results[2];
  int k = 0;
  for (Backend* be : {cpu.get(), gpu.get()}) {
    std::vector<DeviceBuffer> s, d;
    std::vector<const void*> bases;
    for (int64_t g = 0; g < groups; ++g) {
      s.push_back(put(*be, src[static_cast<size_t>(g)]));
      d.push_back(poisoned_buffer(*be, static_cast<size_t>(dst_rows * width)));
    }
    for (const DeviceBuffer& b : d) bases.push_back(b.data());
    for (const DeviceBuffer& b : s) bases.push_back(b.data());
    const DeviceBuffer di = put(*be, dst_index), si = put(*be, src_index);
    const DeviceBuffer table = be->allocate(sizeof(void*) * bases.size(), MemoryUse::Activations, "group bases");
    be->upload(table, 0, bases.data(), sizeof(void*) * bases.size());
    void* const* dst_groups = static_cast<void* const*>(table.data());
    const ninfer_copy_rows_args a{nullptr, width,  di.as<int32_t>(), nullptr,    width,
                                  si.as<int32_t>(), 2, width,           groups, dst_groups,
                                  dst_groups + groups};
    be->run(NINFER_OP_COPY_ROWS, {2, {width, 0, 0, 0}, NINFER_DTYPE_F32}, &a);
    for (const DeviceBuffer& b : d) results[k].push_back(get<float>(*be, b, static_cast<size_t>(dst_rows * width)));
    ++k;
  }
  for (int64_t g = 0; g < groups; ++g)
    EXPECT_TRUE(same_bits(results[0][static_cast<size_t>(g)], results[1][static_cast<size_t>(g)])) << "group " << g;
  // The copied rows are the source's (the CPU plugin's result checked on its own in CopyRowsOp).
  EXPECT_EQ(std::memcmp(results[1][4].data() + 3 * width, src[4].data() + 7 * width, sizeof(float) * width), 0);
}

TEST(SpeculationOpsGpu, DraftAcceptEqualsTheCpuPlugin) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  auto rng = fresh_rng("gpu draft_accept");
  std::uniform_int_distribution<int32_t> tok(-1, 2);
  for (int32_t K = 1; K <= 5; ++K)
    for (int32_t seqs : {1, 3, 37}) {
      const size_t n = static_cast<size_t>(seqs) * (K + 1);
      std::vector<int32_t> ids(n), picks(n);
      for (size_t i = 0; i < n; ++i) {
        ids[i] = tok(rng);
        picks[i] = tok(rng);
      }
      for (size_t i = 0; i + 1 < n; i += 2) picks[i] = ids[i + 1]; // long agreeing prefixes too
      std::vector<int32_t> got[2][2];
      int k = 0;
      for (Backend* be : {cpu.get(), gpu.get()}) {
        const DeviceBuffer di = put(*be, ids), dp = put(*be, picks);
        const DeviceBuffer acc = put(*be, std::vector<int32_t>(static_cast<size_t>(seqs), -9)),
                           keep = put(*be, std::vector<int32_t>(static_cast<size_t>(seqs), -9));
        const ninfer_draft_accept_args a{di.as<int32_t>(), dp.as<int32_t>(), acc.as<int32_t>(), keep.as<int32_t>(),
                                         seqs, K};
        be->run(NINFER_OP_DRAFT_ACCEPT, {seqs, {K, 0, 0, 0}, NINFER_DTYPE_F32}, &a);
        got[k][0] = get<int32_t>(*be, acc, static_cast<size_t>(seqs));
        got[k][1] = get<int32_t>(*be, keep, static_cast<size_t>(seqs));
        ++k;
      }
      EXPECT_EQ(got[0][0], got[1][0]) << "K " << K << " seqs " << seqs << ": accepted";
      EXPECT_EQ(got[0][1], got[1][1]) << "K " << K << " seqs " << seqs << ": kept rows";
    }
}

// A verification call: three sequences of 4 tokens continuing states a first call left. The
// planner's route writes the state after every token; the outputs and states are the CPU
// plugin's within float32 reordering, and no other variant takes the flag.
TEST(SpeculationOpsGpu, GatedDeltaRuleTokenStatesEqualTheCpuPlugin) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  auto rng = fresh_rng("gpu gated_delta_rule token states");
  const int32_t Hk = 2, Hv = 4, Dk = 128, Dv = 128, slots = 3;
  const Batch first(slots, 9, 0), verify(slots, 4, 9);
  const int64_t row = 2 * Hk * Dk + Hv * Dv, per = int64_t{Hv} * Dk * Dv;
  auto inputs = [&](int64_t T) {
    std::vector<float> qkv = randn(rng, static_cast<size_t>(T * row)), g(static_cast<size_t>(T * Hv)),
                       beta(static_cast<size_t>(T * Hv));
    for (int64_t t = 0; t < T; ++t) // q and k L2-normalised per head, as the model feeds them
      for (int h = 0; h < 2 * Hk; ++h) {
        float* r = &qkv[static_cast<size_t>(t * row + h * Dk)];
        double ss = 0;
        for (int i = 0; i < Dk; ++i) ss += double(r[i]) * r[i];
        for (int i = 0; i < Dk; ++i) r[i] = float(r[i] / std::sqrt(ss));
      }
    std::uniform_real_distribution<float> gd(-2.f, -0.01f), bd(0.05f, 0.95f);
    for (auto& x : g) x = gd(rng);
    for (auto& x : beta) x = bd(rng);
    return std::tuple{qkv, g, beta};
  };
  const auto in0 = inputs(first.tokens()), in1 = inputs(verify.tokens());
  std::vector<float> out[2], states[2], token_states[2];
  int k = 0;
  for (Backend* be : {cpu.get(), gpu.get()}) {
    const DeviceBuffer state = put(*be, std::vector<float>(static_cast<size_t>(slots * per), 0.f));
    for (const auto* call : {&in0, &in1}) {
      const bool keep = call == &in1;
      const Batch& b = keep ? verify : first;
      const int64_t T = b.tokens();
      const BatchOn on(*be, b);
      const auto& [qkv, g, beta] = *call;
      const DeviceBuffer x = put(*be, qkv), dg = put(*be, g), db = put(*be, beta);
      const DeviceBuffer o = poisoned_buffer(*be, static_cast<size_t>(T * Hv * Dv));
      const DeviceBuffer ts = poisoned_buffer(*be, static_cast<size_t>(T * per));
      const float* q = x.as<float>();
      const ninfer_gated_delta_rule_args a{q,      q + Hk * Dk, row,  q + 2 * Hk * Dk, row, dg.as<float>(), db.as<float>(),
                                           state.as<float>(), o.as<float>(), int64_t{Hv} * Dv, on.tb, T, Hk, Hv, Dk, Dv,
                                           1.f / std::sqrt(float(Dk)), keep ? ts.as<float>() : nullptr};
      ninfer_shape s{T, {keep ? 4 : 9, Hv, Dk, Dv}, NINFER_DTYPE_F32};
      s.flags = keep ? NINFER_SHAPE_TOKEN_STATES : 0u;
      be->reserve_workspace(NINFER_OP_GATED_DELTA_RULE, s);
      be->run(NINFER_OP_GATED_DELTA_RULE, s, &a);
      if (keep) {
        if (be == gpu.get()) {
          EXPECT_EQ(be->plan(NINFER_OP_GATED_DELTA_RULE, s).variant, "recurrent");
          EXPECT_EQ(variants_accepting(*be, NINFER_OP_GATED_DELTA_RULE, s, "recurrent"), "")
              << "variants that would not write token states accept the flag";
        }
        out[k] = get<float>(*be, o, static_cast<size_t>(T * Hv * Dv));
        token_states[k] = get<float>(*be, ts, static_cast<size_t>(T * per));
      }
    }
    states[k] = get<float>(*be, state, static_cast<size_t>(slots * per));
    ++k;
  }
  for (const auto& [what, a, b] : {std::tuple{"outputs", &out[0], &out[1]}, std::tuple{"token states", &token_states[0], &token_states[1]},
                                   std::tuple{"final states", &states[0], &states[1]}}) {
    const Mismatch m = compare(*b, widen(*a), kGpuVsCpuF32);
    EXPECT_TRUE(m.ok) << what << ": " << m.describe();
  }
}

// The conv's token states are windows of its inputs: bit for bit the CPU plugin's.
TEST(SpeculationOpsGpu, CausalConv1dTokenStatesEqualTheCpuPlugin) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend();
  auto rng = fresh_rng("gpu causal_conv1d token states");
  const int32_t C = 640, K = 4, slots = 3;
  const Batch first(slots, 2, 0), verify(slots, 6, 2); // the window still reaches the old state
  const std::vector<float> w = randn(rng, static_cast<size_t>(C * K), 0.5f);
  const std::vector<float> x0 = randn(rng, static_cast<size_t>(first.tokens() * C)),
                           x1 = randn(rng, static_cast<size_t>(verify.tokens() * C));
  std::vector<float> out[2], token_states[2], states[2];
  int k = 0;
  for (Backend* be : {cpu.get(), gpu.get()}) {
    const DeviceBuffer dw = put(*be, w), state = put(*be, std::vector<float>(static_cast<size_t>(slots * C * (K - 1)), 0.f));
    for (const bool keep : {false, true}) {
      const Batch& b = keep ? verify : first;
      const int64_t T = b.tokens();
      const BatchOn on(*be, b);
      const DeviceBuffer x = put(*be, keep ? x1 : x0), o = poisoned_buffer(*be, static_cast<size_t>(T * C));
      const DeviceBuffer ts = poisoned_buffer(*be, static_cast<size_t>(T * C * (K - 1)));
      const ninfer_causal_conv1d_args a{x.as<float>(), C, dw.as<float>(), state.as<float>(), o.as<float>(), C, on.tb,
                                        T, C, K, keep ? ts.as<float>() : nullptr};
      ninfer_shape s{T, {C, K, 0, 0}, NINFER_DTYPE_F32};
      s.flags = keep ? NINFER_SHAPE_TOKEN_STATES : 0u;
      be->run(NINFER_OP_CAUSAL_CONV1D, s, &a);
      if (keep) {
        if (be == gpu.get()) {
          EXPECT_EQ(be->plan(NINFER_OP_CAUSAL_CONV1D, s).variant, "tiled");
          EXPECT_EQ(variants_accepting(*be, NINFER_OP_CAUSAL_CONV1D, s, "tiled"), "");
        }
        out[k] = get<float>(*be, o, static_cast<size_t>(T * C));
        token_states[k] = get<float>(*be, ts, static_cast<size_t>(T * C * (K - 1)));
      }
    }
    states[k] = get<float>(*be, state, static_cast<size_t>(slots * C * (K - 1)));
    ++k;
  }
  EXPECT_TRUE(same_bits(token_states[0], token_states[1])) << "token states";
  EXPECT_TRUE(same_bits(states[0], states[1])) << "final states";
  const Mismatch m = compare(out[1], widen(out[0]), kGpuVsCpuF32);
  EXPECT_TRUE(m.ok) << "outputs: " << m.describe();
}

// A verification pass (4 sequences of 4 tokens, token states kept) runs the fused decode
// variants, which walk each sequence's tokens and write the token states; the walk's results
// are checked in gdn_decode_test.cpp (GdnDecode*.VerificationPasses*).
TEST(SpeculationOpsGpu, VerificationCallsRunTheFusedDecodeVariants) {
  NINFER_REQUIRE_CUDA_BACKEND();
  auto gpu = make_cuda_backend();
  ninfer_shape step{16, {48, 128, 128, 16}, NINFER_DTYPE_F32};
  step.max_seq_tokens = 4;
  ninfer_shape conv{16, {10240, 4, 4, 128}, NINFER_DTYPE_F32};
  step.flags = conv.flags = NINFER_SHAPE_TOKEN_STATES;
  const Plan ps = gpu->plan(NINFER_OP_GATED_DELTA_STEP, step);
  const Plan pc = gpu->plan(NINFER_OP_CONV_L2_NORM, conv);
  EXPECT_FALSE(ps.unfused) << ps.reason;
  EXPECT_EQ(ps.variant, "decode");
  EXPECT_FALSE(pc.unfused) << pc.reason;
  EXPECT_EQ(pc.variant, "decode");
}
