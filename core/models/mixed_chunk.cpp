#include "ninfer/models/mixed_chunk.hpp"

#include <algorithm>
#include <cmath>

#include "ninfer/abi/device_info.h"
#include "ninfer/checkpoint/expected_tensors.hpp"

namespace ninfer {
namespace {

// CUDA: the H200 prefills at 51-54% of its 789 TFLOP/s matmul rate and decodes at 86-95% of its
// 4.24 TB/s (docs/performance.md, "Where it stands": Qwen3.5-27B 8,311 tok/s x 48.7 GFLOP
// against 78.0 tok/s x 51.3 GB; Qwen3-8B 30,782 x 13.9 GFLOP against 248.2 x 15.1 GB), about
// 100 FLOP per byte.
constexpr double kCudaFlopsPerByte = 100;
// The CPU reference plugin accumulates in double and is bound by arithmetic in decode too: a few
// FLOP per byte, so the rule gives the floor there.
constexpr double kCpuFlopsPerByte = 4;

double elements(const ExpectedTensor& t) {
  double n = 1;
  for (int64_t d : t.shape) n *= static_cast<double>(d);
  return n;
}

} // namespace

double mixed_step_flops_per_byte(int32_t device_kind) {
  return device_kind == NINFER_DEVICE_CUDA ? kCudaFlopsPerByte : kCpuFlopsPerByte;
}

MixedStepCost mixed_step_cost(const ModelConfig& cfg, double weight_bytes, int64_t max_context, int32_t device_kind) {
  double layer_params = 0, head_params = 0, table_params = 0;
  for (const ExpectedTensor& t : expected_tensors(cfg)) {
    if (t.role == TensorRole::Embedding) table_params += elements(t);
    else if (t.role == TensorRole::Linear) (t.layer < 0 ? head_params : layer_params) += elements(t);
  }
  if (cfg.tie_word_embeddings) head_params = table_params; // the LM head reads the table
  const double all_params = layer_params + table_params + (cfg.tie_word_embeddings ? 0 : head_params);
  // Quantized or mixed dtypes: the average bytes per parameter of what the backend holds (norm
  // and conv weights are a rounding error beside the matrices).
  const double bytes_per_param = all_params > 0 ? weight_bytes / all_params : 0;
  MixedStepCost c;
  c.decode_bytes = bytes_per_param * (layer_params + head_params);
  // Attention over the span: q.k and p.v, 2 FLOP per key per head dimension each.
  const double attention = 4.0 * static_cast<double>(max_context) * static_cast<double>(cfg.num_attention_heads) *
                           static_cast<double>(cfg.head_dim) *
                           static_cast<double>(cfg.num_layers_of(LayerKind::FullAttention));
  c.flops_per_token = 2 * layer_params + kMixedAttentionFlopCost * attention;
  c.flops_per_byte = mixed_step_flops_per_byte(device_kind);
  return c;
}

int32_t mixed_chunk_rule(const MixedStepCost& c, int32_t prefill_chunk) {
  const double tokens =
      c.flops_per_token > 0 ? (kMixedStepBudget - 1) * c.flops_per_byte * c.decode_bytes / c.flops_per_token : 0;
  const auto granules = static_cast<int64_t>(std::floor(tokens / kMixedChunkGranule));
  const int64_t chunk = std::max<int64_t>(kMinMixedChunk, granules * kMixedChunkGranule);
  return static_cast<int32_t>(std::min<int64_t>(chunk, prefill_chunk));
}

} // namespace ninfer
