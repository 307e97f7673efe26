// The default mixed chunk (ninfer/models/mixed_chunk.hpp): its cost terms against the Qwen3-8B
// shape counted by hand from its published widths (not from the expected-tensor list the rule
// reads), the chunk against the formula, and the rule's bounds.
#include <gtest/gtest.h>

#include <cmath>

#include "ninfer/abi/device_info.h"
#include "ninfer/checkpoint/shape_presets.hpp"
#include "ninfer/models/mixed_chunk.hpp"

using namespace ninfer;

namespace {

// Sums of products of integers below 2^53 are exact in double; the cost terms are such sums
// scaled by one division.
constexpr double kRelTol = 1e-12;

// Qwen3-8B by hand: per layer q (heads x head_dim rows), k and v (kv_heads x head_dim each), o,
// gate, up and down over the hidden width; the LM head is vocab x hidden; the embedding table
// as large (untied).
struct HandCount {
  double layer_params, head_params, table_params;
};
HandCount qwen3_8b_by_hand(const ModelConfig& c) {
  const double h = static_cast<double>(c.hidden_size), hd = static_cast<double>(c.head_dim);
  const double q = static_cast<double>(c.num_attention_heads) * hd;
  const double kv = static_cast<double>(c.num_key_value_heads) * hd;
  const double per_layer = h * (q + 2 * kv) + q * h + 3 * h * static_cast<double>(c.intermediate_size);
  const double vocab_rows = static_cast<double>(c.vocab_size) * h;
  return {per_layer * static_cast<double>(c.num_layers), vocab_rows, vocab_rows};
}

} // namespace

TEST(MixedChunkRule, CostTermsOfQwen3_8bMatchAHandCount) {
  const ModelConfig cfg = shape_preset_config("qwen3-8b");
  ASSERT_FALSE(cfg.tie_word_embeddings);
  const HandCount n = qwen3_8b_by_hand(cfg);
  const double bf16_bytes = 2 * (n.layer_params + n.head_params + n.table_params);
  constexpr int64_t kContext = 32768;
  const MixedStepCost c = mixed_step_cost(cfg, bf16_bytes, kContext, NINFER_DEVICE_CUDA);
  EXPECT_NEAR(c.decode_bytes, 2 * (n.layer_params + n.head_params), kRelTol * c.decode_bytes);
  // Attention: q.k and p.v over 32,768 keys, 2 FLOP per multiply-add, every layer of 32 heads x 128.
  const double attention = 2.0 * 2.0 * kContext * static_cast<double>(cfg.num_attention_heads * cfg.head_dim) *
                           static_cast<double>(cfg.num_layers);
  EXPECT_NEAR(c.flops_per_token, 2 * n.layer_params + kMixedAttentionFlopCost * attention, kRelTol * c.flops_per_token);
  EXPECT_EQ(c.flops_per_byte, mixed_step_flops_per_byte(NINFER_DEVICE_CUDA));
  // The chunk: (1.5 - 1) x flops_per_byte x bytes / flops, down to a multiple of 8.
  const double tokens = (kMixedStepBudget - 1) * c.flops_per_byte * c.decode_bytes / c.flops_per_token;
  const int32_t want = static_cast<int32_t>(std::floor(tokens / kMixedChunkGranule)) * kMixedChunkGranule;
  ASSERT_GE(want, kMinMixedChunk);
  EXPECT_EQ(mixed_chunk_rule(c, 4096), want);
}

TEST(MixedChunkRule, ShorterWhereTokensCostMoreAndWithinItsBounds) {
  const ModelConfig cfg = shape_preset_config("qwen3_5-27b");
  constexpr double kBf16Bytes = 54e9;
  const auto chunk = [&](double bytes, int64_t ctx, int32_t kind, int32_t prefill = 4096) {
    return mixed_chunk_rule(mixed_step_cost(cfg, bytes, ctx, kind), prefill);
  };
  // Fewer bytes per parameter (int4) make the decode step shorter, a longer context makes each
  // prompt token dearer: both shorten the chunk.
  EXPECT_LT(chunk(kBf16Bytes / 4, 4096, NINFER_DEVICE_CUDA), chunk(kBf16Bytes, 4096, NINFER_DEVICE_CUDA));
  EXPECT_LT(chunk(kBf16Bytes, 131072, NINFER_DEVICE_CUDA), chunk(kBf16Bytes, 4096, NINFER_DEVICE_CUDA));
  for (int64_t ctx : {int64_t{4096}, int64_t{33000}, int64_t{262144}}) {
    const int32_t got = chunk(kBf16Bytes, ctx, NINFER_DEVICE_CUDA);
    EXPECT_EQ(got % kMixedChunkGranule, 0) << ctx;
    EXPECT_GE(got, kMinMixedChunk) << ctx;
  }
  // The CPU reference plugin is not bound by bandwidth: the floor. A prefill chunk below the
  // floor caps it.
  EXPECT_EQ(chunk(kBf16Bytes, 4096, NINFER_DEVICE_CPU), kMinMixedChunk);
  EXPECT_EQ(chunk(kBf16Bytes, 4096, NINFER_DEVICE_CUDA, 5), 5);
  EXPECT_EQ(chunk(kBf16Bytes * 1000, 16, NINFER_DEVICE_CUDA, 64), 64);
}
