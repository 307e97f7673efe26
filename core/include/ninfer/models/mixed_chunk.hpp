// How many prompt tokens a mixed step carries when the options leave it to the model
// (ModelOptions::mixed_chunk = 0): the largest chunk that keeps a mixed step within
// kMixedStepBudget times a decode step, by a two-term cost model (docs/serving.md, "Mixed steps
// and the chunk rule"):
//
//   decode step  ~ decode_bytes / bandwidth                (it reads every projection once)
//   mixed step   ~ decode step + chunk x flops_per_token / matmul rate
//   chunk        = (budget - 1) x flops_per_byte x decode_bytes / flops_per_token
//
// where flops_per_byte = matmul rate / bandwidth as the device's kernels reach them. The model
// adds the chunk's FLOPs to the decode step's bytes instead of overlapping them (a step of few
// tokens is still bound by the weights' bytes), so it errs towards shorter chunks. Retuning means
// changing kMixedStepBudget or kMixedAttentionFlopCost here, or a device kind's flops_per_byte
// in core/models/mixed_chunk.cpp, and nothing else.
#pragma once

#include <cstdint>

#include "ninfer/checkpoint/model_config.hpp"

namespace ninfer {

// A mixed step's time over a decode step's that the default chunk aims at.
inline constexpr double kMixedStepBudget = 1.5;
// What an attention FLOP of a short chunk costs against a projection FLOP. The chunk's attention
// runs on the split-KV decode (up to 128 tokens on hd128 tensor cores, which read the cache once
// per run of tokens), bound by reading the span rather than by its FLOPs, so at depth it costs
// more than the projections' rate says: 2 is what the Qwen3-8B shape's mixed steps beside a
// 32,000-token prompt ask (H100, docs/serving.md: chunks of 16 gave 1.66x a decode step, chunks
// of 8 1.45x, and the rule gives 8 there; beside a 16,000-token prompt it gives 16, between the
// 24 (1.48x) and the 8 (1.46x) measured there).
inline constexpr double kMixedAttentionFlopCost = 2;
// Chunks are a multiple of this many tokens and at least kMinMixedChunk (so a prompt still
// advances where the model gives less, as on the CPU reference plugin).
inline constexpr int32_t kMixedChunkGranule = 8;
inline constexpr int32_t kMinMixedChunk = kMixedChunkGranule;

struct MixedStepCost {
  double decode_bytes = 0;    // what one decode step reads: every projection, the LM head's included
  double flops_per_token = 0; // one prompt token: 2 per projection parameter of the layers plus
                              // its attention over a span of max_context keys (weighted by
                              // kMixedAttentionFlopCost)
  double flops_per_byte = 0;  // the device's matmul rate over its memory bandwidth
};

// The device kind's flops_per_byte (ninfer_device_kind).
double mixed_step_flops_per_byte(int32_t device_kind);

// The cost terms of a model of `cfg` whose weights take `weight_bytes` on the backend, attending
// over at most `max_context` keys, on a device of `device_kind`.
MixedStepCost mixed_step_cost(const ModelConfig& cfg, double weight_bytes, int64_t max_context, int32_t device_kind);

// The chunk the rule gives, in [min(kMinMixedChunk, prefill_chunk), prefill_chunk].
int32_t mixed_chunk_rule(const MixedStepCost& cost, int32_t prefill_chunk);

} // namespace ninfer
