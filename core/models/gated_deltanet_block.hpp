// Gated DeltaNet, Qwen3.5's linear-attention layer:
//   qkv|z|a|b = x W_qkv | x W_z | x W_a | x W_b  (one stacked matrix)
//   g, beta  = gating of a, b                   (decay and write strength per value head;
//                                                prompts: gdn_gating's own projection of x)
//   qkv      = silu(causal depthwise conv1d(qkv))   with per-slot conv state
//   q, k     = L2-normalised per key head (eps 1e-6)
//   o        = gated delta rule(q / sqrt(k_dim), k, v, g, beta)  with per-slot float32 state
//   o        = rmsnorm(o) * w * silu(z)         per value head
//   out      = o W_out
#pragma once

#include <string>

#include "block.hpp"
#include "weights.hpp"

namespace ninfer::models {

struct GatedDeltaNetSpec {
  int32_t k_heads = 0, v_heads = 0, k_dim = 0, v_dim = 0, conv_kernel = 0;
  float eps = 1e-6f; // the gated output norm's
};

class GatedDeltaNetBlock final : public Mixer {
 public:
  // Loads the layer's weights under `prefix` and allocates conv + recurrent state for
  // limits.max_sequences slots.
  GatedDeltaNetBlock(WeightLoader& w, Backend& be, const std::string& prefix, const GatedDeltaNetSpec& spec,
                     const StepLimits& limits);

  ScratchNeeds needs() const override;
  void forward(Backend& be, const Step& s, const Scratch& scratch, const ops::NormedInput& in,
               ops::Rows resid) override;
  void reset(Backend& be, int32_t slot) override;
  void save_state(Backend& be, int32_t slot, int32_t copy) override;
  void load_state(Backend& be, int32_t slot, int32_t copy) override;
  void fork(Backend& be, int32_t src, int32_t dst) override;
  size_t prefix_state_bytes() const override { return conv_state_bytes() + recurrent_state_bytes(); }
  void spill_prefix_state(Backend& be, int32_t entry, const HostBuffer& to, size_t offset) override;
  void unspill_prefix_state(Backend& be, int32_t entry, const HostBuffer& from, size_t offset) override;
  std::vector<KeptState> kept_states() const override;

 private:
  int64_t key_width() const { return int64_t{spec_.k_heads} * spec_.k_dim; }
  int64_t value_width() const { return int64_t{spec_.v_heads} * spec_.v_dim; }
  int64_t conv_channels() const { return 2 * key_width() + value_width(); }
  size_t conv_state_bytes() const { return sizeof(float) * conv_channels() * (spec_.conv_kernel - 1); }
  size_t recurrent_state_bytes() const {
    return sizeof(float) * int64_t{spec_.v_heads} * spec_.k_dim * spec_.v_dim;
  }

  GatedDeltaNetSpec spec_;
  Projection in_proj_;
  Matrix w_a_, w_b_, out_;
  Vector a_log_, dt_bias_, conv_w_, norm_w_;
  DeviceBuffer conv_state_, recurrent_state_;
  // The slots' snapshots (StepLimits::state_snapshots), then the prefix cache's copies
  // (StepLimits::prefix_states), in two allocations each so the memory report tells them apart.
  DeviceBuffer conv_snapshot_, recurrent_snapshot_, conv_prefix_, recurrent_prefix_;
  int32_t snapshot_copies_ = 0;
  // Speculation only: the states after every token of a verification pass (limits.max_sequences
  // x (draft_tokens + 1) tokens), from which a round settles each slot (kept_states).
  DeviceBuffer conv_token_states_, recurrent_token_states_;
};

} // namespace ninfer::models
