// Full (softmax) attention, the layer shared by Qwen3 and Qwen3.5:
//   q, k, v = x Wq, x Wk, x Wv        (one stacked matrix; Qwen3.5's q_proj also yields a gate)
//   q, k    = per-head RMSNorm, then rotary embedding (full or partial): one op, head_norm_rope
//   cache  <- k, v;  o = causal GQA attention of q over the slot's cache
//   o      *= sigmoid(gate)           (Qwen3.5 only)
//   out     = o Wo
#pragma once

#include <string>

#include "block.hpp"
#include "ninfer/checkpoint/model_config.hpp"
#include "weights.hpp"

namespace ninfer::models {

struct AttentionSpec {
  int32_t heads = 0, kv_heads = 0, head_dim = 0, rotary_dim = 0;
  double rope_theta = 10000.0;
  float eps = 1e-6f;
  bool output_gate = false;              // q_proj rows per head: [query | gate]
  ops::NormScale qk_norm = ops::NormScale::W;
};

// The attention layer of any family, as its config describes it.
AttentionSpec attention_spec(const ModelConfig& cfg);

class AttentionBlock final : public Mixer {
 public:
  // Loads the layer's weights under `prefix` ("model.layers.N.") and allocates its KV cache:
  // limits.kv_pool's blocks of limits.kv_dtype elements, read through the pool's block table.
  AttentionBlock(WeightLoader& w, Backend& be, const std::string& prefix, const AttentionSpec& spec,
                 const StepLimits& limits);

  ScratchNeeds needs() const override;
  void forward(Backend& be, const Step& s, const Scratch& scratch, const ops::NormedInput& in,
               ops::Rows resid) override;
  void reset(Backend&, int32_t) override {} // positions gate what is read; nothing to clear
  void copy_kv_block(Backend& be, int32_t from, int32_t to) override;
  size_t kv_block_bytes() const override { return 2 * (block_bytes_ + block_scale_bytes_); }
  void spill_kv_block(Backend& be, int32_t block, const HostBuffer& to, size_t offset) override;
  void unspill_kv_block(Backend& be, int32_t block, const HostBuffer& from, size_t offset) override;

 private:
  int64_t q_width() const; // query (+ gate) columns of the projection
  int64_t kv_width() const { return int64_t{spec_.kv_heads} * spec_.head_dim; }

  AttentionSpec spec_;
  Projection qkv_;
  Matrix o_;
  Vector q_norm_, k_norm_;
  DeviceBuffer k_cache_, v_cache_;
  DeviceBuffer k_scale_, v_scale_; // a compact format's scales (kv_append.h); empty otherwise
  size_t block_bytes_ = 0, block_scale_bytes_ = 0; // one pool block of k_cache_ (v_cache_), k_scale_ (v_scale_)
  ninfer_kv_cache cache_{};
};

} // namespace ninfer::models
