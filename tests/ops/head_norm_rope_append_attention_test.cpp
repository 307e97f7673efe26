// head_norm_rope_append_attention on the CPU reference plugin: bit for bit head_norm_rope_append
// then attention (each checked against its float64 oracle in head_norm_rope_test.cpp and
// attention_test.cpp), for a decode step of several sequences; a prompt chunk and arguments that
// break the ties between the two halves are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ninfer/abi/ops/head_norm_rope_append_attention.h"
#include "ninfer/support/error.hpp"
#include "attention_layer_case.hpp"
#include "kv_blocks.hpp"
#include "op_test_env.hpp"

using namespace ninfer;
using namespace ninfer::test;

namespace {

using Layout = AttentionLayout;

// Qwen3's layout (full rotary) and Qwen3.5's (gated q, a quarter rotary), small head counts.
const Layout kLayouts[] = {{4, 2, 128, 128, 1e6, false}, {3, 1, 256, 64, 1e7, true}};
// Each slot's 16 positions in 4 blocks of 4, shuffled through a pool with 2 blocks no slot owns.
constexpr int32_t kSlots = 3, kCapacity = 16, kBlockTokens = 4, kSpareBlocks = 2;

// One call's buffers, and the fused op's arguments over them.
struct Case {
  KvBlockLayout layout;
  std::vector<float> proj, wq, wk, k_cache, v_cache, out;
  std::vector<int32_t> seq_start, seq_slot, token_pos, token_seq;
  ninfer_head_norm_rope_append_attention_args args{};

  void bind(const Layout& l) {
    const int64_t T = static_cast<int64_t>(token_pos.size());
    float* x = proj.data();
    const ninfer_token_batch batch{static_cast<int32_t>(seq_slot.size()), seq_start.data(), seq_slot.data(),
                                   token_pos.data(), token_seq.data()};
    const ninfer_kv_cache cache = layout.cache(k_cache.data(), v_cache.data(), l.kv_heads, l.head_dim, NINFER_DTYPE_F32);
    args.prep.rope = {x,          l.token_stride(), l.q_head_stride(), x + l.k_offset(), l.token_stride(),
                      l.head_dim, wq.data(),        wk.data(),         token_pos.data(), T,
                      l.q_heads,  l.kv_heads,       l.head_dim,        l.rotary_dim,     1e-6f,
                      1,          l.theta};
    args.prep.append = {x + l.k_offset(), l.token_stride(), x + l.v_offset(), l.token_stride(), cache, batch, T};
    args.attn = {x,     l.token_stride(),           l.q_head_stride(), cache, batch, out.data(),
                 int64_t{l.q_heads} * l.head_dim, T, l.q_heads, 1.0f / std::sqrt(static_cast<float>(l.head_dim))};
  }
};

// The call of `seqs`, the cache filled with random rows.
Case make_case(std::mt19937_64& rng, const Layout& l, const std::vector<SeqSpan>& seqs) {
  Case c;
  const HostTokenBatch b(seqs);
  c.seq_start = b.seq_start, c.seq_slot = b.seq_slot, c.token_pos = b.token_pos, c.token_seq = b.token_seq;
  const int64_t T = static_cast<int64_t>(c.token_pos.size());
  c.layout = KvBlockLayout::shuffled(kSlots, kCapacity, kBlockTokens, kSpareBlocks, rng);
  const size_t cache = static_cast<size_t>(c.layout.pool_rows()) * l.kv_heads * l.head_dim;
  c.proj = randn(rng, static_cast<size_t>(T * l.token_stride()), 2.f);
  c.wq = randn(rng, l.head_dim, 0.3f);
  c.wk = randn(rng, l.head_dim, 0.3f);
  c.k_cache = randn(rng, cache);
  c.v_cache = randn(rng, cache);
  c.out.assign(static_cast<size_t>(T * l.q_heads * l.head_dim), std::nanf(""));
  c.bind(l);
  return c;
}

ninfer_shape shape(const Layout& l, const Case& c) {
  int32_t span = 0;
  for (int32_t p : c.token_pos) span = std::max(span, p + 1);
  ninfer_shape s{static_cast<int64_t>(c.token_pos.size()), {l.head_dim, l.q_heads, l.kv_heads, span}, NINFER_DTYPE_F32};
  s.kv_block_tokens = kBlockTokens;
  return s;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

} // namespace

TEST(HeadNormRopeAppendAttentionOp, EqualsHeadNormRopeAppendThenAttentionBitForBit) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("head_norm_rope_append_attention");
  for (const Layout& l : kLayouts) {
    const Case start = make_case(rng, l, {{2, 5, 1}, {0, 0, 1}, {1, 15, 1}});
    Case fused = start, two = start;
    fused.bind(l);
    two.bind(l);
    be.run(NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION, shape(l, fused), &fused.args);
    const ninfer_shape rope_shape{static_cast<int64_t>(two.token_pos.size()),
                                  {l.head_dim, l.q_heads, l.kv_heads, l.rotary_dim}, NINFER_DTYPE_F32};
    be.run(NINFER_OP_HEAD_NORM_ROPE_APPEND, rope_shape, &two.args.prep);
    be.run(NINFER_OP_ATTENTION, shape(l, two), &two.args.attn);
    const std::string what = std::to_string(l.head_dim) + "-dim heads" + (l.gated ? ", gated q" : "");
    EXPECT_TRUE(same_bits(fused.out, two.out)) << what << ": attention output";
    EXPECT_TRUE(same_bits(fused.k_cache, two.k_cache)) << what << ": K cache";
    EXPECT_TRUE(same_bits(fused.v_cache, two.v_cache)) << what << ": V cache";
    EXPECT_FALSE(same_bits(fused.k_cache, start.k_cache)) << what << ": nothing was appended";
    for (float v : fused.out) ASSERT_TRUE(std::isfinite(v)) << what << ": an output row was not written";
  }
}

TEST(HeadNormRopeAppendAttentionOp, RefusesPromptChunksAndUntiedArguments) {
  Backend be = cpu_backend();
  auto rng = fresh_rng("head_norm_rope_append_attention refusals");
  const Layout& l = kLayouts[0];
  Case chunk = make_case(rng, l, {{0, 3, 2}});
  chunk.bind(l);
  EXPECT_THROW(be.run(NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION, shape(l, chunk), &chunk.args), Error)
      << "a sequence of two tokens is a prompt chunk";
  Case c = make_case(rng, l, {{0, 3, 1}});
  c.bind(l);
  std::vector<float> other(c.proj.size());
  ninfer_head_norm_rope_append_attention_args untied = c.args;
  untied.attn.q = other.data();
  EXPECT_THROW(be.run(NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION, shape(l, c), &untied), Error) << "attn.q";
  untied = c.args;
  untied.attn.cache.v = other.data();
  EXPECT_THROW(be.run(NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION, shape(l, c), &untied), Error) << "attn.cache";
  untied = c.args;
  const std::vector<int32_t> other_table = c.layout.table;
  untied.attn.cache.block_table = other_table.data();
  EXPECT_THROW(be.run(NINFER_OP_HEAD_NORM_ROPE_APPEND_ATTENTION, shape(l, c), &untied), Error)
      << "attn.cache.block_table";
}
