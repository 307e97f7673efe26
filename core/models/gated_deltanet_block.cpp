#include "gated_deltanet_block.hpp"

#include <cmath>

#include "step_parts.hpp"

namespace ninfer::models {

namespace {
// FLA and transformers normalise q and k with this epsilon, not the config's rms_norm_eps.
constexpr float kQkL2Eps = 1e-6f;
} // namespace

GatedDeltaNetBlock::GatedDeltaNetBlock(WeightLoader& w, Backend& be, const std::string& p,
                                       const GatedDeltaNetSpec& spec, const StepLimits& limits)
    : spec_(spec),
      // a and b ride along as the last 2 x v_heads rows: a decode step's gating then needs no
      // projection of its own (gated_delta_step takes the raw a, b). In quantized checkpoints a
      // and b stay float while qkv and z are packed: two parts (weights.hpp).
      in_proj_(w.projection({p + "linear_attn.in_proj_qkv.weight", p + "linear_attn.in_proj_z.weight",
                             p + "linear_attn.in_proj_a.weight", p + "linear_attn.in_proj_b.weight"},
                            p + "linear_attn qkv|z|a|b")),
      // Prompts: gdn_gating takes its weights in the activations' dtype (float32 here); they are small.
      w_a_(w.matrix_f32(p + "linear_attn.in_proj_a.weight", p + "linear_attn.in_proj_a")),
      w_b_(w.matrix_f32(p + "linear_attn.in_proj_b.weight", p + "linear_attn.in_proj_b")),
      out_(w.matrix(p + "linear_attn.out_proj.weight", p + "linear_attn.out_proj")),
      a_log_(w.vector(p + "linear_attn.A_log", p + "linear_attn.A_log")),
      dt_bias_(w.vector(p + "linear_attn.dt_bias", p + "linear_attn.dt_bias")),
      // [channels, 1, kernel] flattens to the op's [channels, kernel].
      conv_w_(w.vector(p + "linear_attn.conv1d.weight", p + "linear_attn.conv1d")),
      norm_w_(w.vector(p + "linear_attn.norm.weight", p + "linear_attn.norm")) {
  const size_t slots = static_cast<size_t>(limits.max_sequences);
  conv_state_ = be.allocate(slots * conv_state_bytes(), MemoryUse::State, p + "linear_attn conv state");
  recurrent_state_ = be.allocate(slots * recurrent_state_bytes(), MemoryUse::State, p + "linear_attn recurrent state");
  be.zero(conv_state_, 0, conv_state_.bytes());
  be.zero(recurrent_state_, 0, recurrent_state_.bytes());
  if (limits.state_snapshots) {
    snapshot_copies_ = limits.max_sequences;
    conv_snapshot_ = be.allocate(slots * conv_state_bytes(), MemoryUse::State, p + "linear_attn conv snapshot");
    recurrent_snapshot_ = be.allocate(slots * recurrent_state_bytes(), MemoryUse::State, p + "linear_attn recurrent snapshot");
  }
  if (limits.prefix_states > 0) {
    const auto n = static_cast<size_t>(limits.prefix_states);
    conv_prefix_ = be.allocate(n * conv_state_bytes(), MemoryUse::PrefixStates, p + "linear_attn conv prefix states");
    recurrent_prefix_ =
        be.allocate(n * recurrent_state_bytes(), MemoryUse::PrefixStates, p + "linear_attn recurrent prefix states");
  }
  if (limits.draft_tokens > 0) {
    const size_t rows = static_cast<size_t>(limits.max_sequences) * static_cast<size_t>(limits.draft_tokens + 1);
    conv_token_states_ = be.allocate(rows * conv_state_bytes(), MemoryUse::State, p + "linear_attn conv state per draft");
    recurrent_token_states_ =
        be.allocate(rows * recurrent_state_bytes(), MemoryUse::State, p + "linear_attn recurrent state per draft");
  }
}

ScratchNeeds GatedDeltaNetBlock::needs() const {
  return {conv_channels() + value_width() + 2 * int64_t{spec_.v_heads}, conv_channels(), value_width(),
          2 * int64_t{spec_.v_heads}};
}

void GatedDeltaNetBlock::reset(Backend& be, int32_t slot) {
  be.zero(conv_state_, slot * conv_state_bytes(), conv_state_bytes());
  be.zero(recurrent_state_, slot * recurrent_state_bytes(), recurrent_state_bytes());
}

void GatedDeltaNetBlock::save_state(Backend& be, int32_t slot, int32_t copy) {
  const size_t conv = conv_state_bytes(), rec = recurrent_state_bytes();
  const bool own = copy < snapshot_copies_;
  const size_t at = static_cast<size_t>(own ? copy : copy - snapshot_copies_);
  be.copy(own ? conv_snapshot_ : conv_prefix_, at * conv, conv_state_, slot * conv, conv);
  be.copy(own ? recurrent_snapshot_ : recurrent_prefix_, at * rec, recurrent_state_, slot * rec, rec);
}

void GatedDeltaNetBlock::load_state(Backend& be, int32_t slot, int32_t copy) {
  const size_t conv = conv_state_bytes(), rec = recurrent_state_bytes();
  const bool own = copy < snapshot_copies_;
  const size_t at = static_cast<size_t>(own ? copy : copy - snapshot_copies_);
  be.copy(conv_state_, slot * conv, own ? conv_snapshot_ : conv_prefix_, at * conv, conv);
  be.copy(recurrent_state_, slot * rec, own ? recurrent_snapshot_ : recurrent_prefix_, at * rec, rec);
}

void GatedDeltaNetBlock::spill_prefix_state(Backend& be, int32_t entry, const HostBuffer& to, size_t offset) {
  const size_t conv = conv_state_bytes(), rec = recurrent_state_bytes(), e = static_cast<size_t>(entry);
  be.spill(to, offset, conv_prefix_, e * conv, conv);
  be.spill(to, offset + conv, recurrent_prefix_, e * rec, rec);
}

void GatedDeltaNetBlock::unspill_prefix_state(Backend& be, int32_t entry, const HostBuffer& from, size_t offset) {
  const size_t conv = conv_state_bytes(), rec = recurrent_state_bytes(), e = static_cast<size_t>(entry);
  be.unspill(conv_prefix_, e * conv, from, offset, conv);
  be.unspill(recurrent_prefix_, e * rec, from, offset + conv, rec);
}

void GatedDeltaNetBlock::fork(Backend& be, int32_t src, int32_t dst) {
  const size_t conv = conv_state_bytes(), rec = recurrent_state_bytes();
  be.copy(conv_state_, dst * conv, conv_state_, src * conv, conv);
  be.copy(recurrent_state_, dst * rec, recurrent_state_, src * rec, rec);
  if (conv_snapshot_.bytes() == 0) return;
  be.copy(conv_snapshot_, dst * conv, conv_snapshot_, src * conv, conv);
  be.copy(recurrent_snapshot_, dst * rec, recurrent_snapshot_, src * rec, rec);
}

// Two copies per layer, at rows the device chose: no host round trip between a round's
// verification and the next step.
std::vector<Mixer::KeptState> GatedDeltaNetBlock::kept_states() const {
  if (conv_token_states_.empty()) return {};
  const auto words = [](size_t bytes) { return static_cast<int64_t>(bytes / sizeof(float)); };
  return {{words(conv_state_bytes()), conv_state_.data(), conv_token_states_.data()},
          {words(recurrent_state_bytes()), recurrent_state_.data(), recurrent_token_states_.data()}};
}

void GatedDeltaNetBlock::forward(Backend& be, const Step& s, const Scratch& scratch, const ops::NormedInput& in,
                                 ops::Rows resid) {
  const int64_t T = s.tokens;
  const int32_t C = static_cast<int32_t>(conv_channels());
  const ops::Rows proj = scratch.proj, conv = scratch.inner, core = scratch.core;
  const ops::GdnDims dims{spec_.k_heads, spec_.v_heads, spec_.k_dim, spec_.v_dim};
  const float scale = 1.0f / std::sqrt(static_cast<float>(spec_.k_dim));
  // A mixed step runs the conv and the delta rule in two calls: its prompt chunk as a prefill
  // (the chunked rule), its one-token rows as a decode step (step_parts.hpp).
  const StepParts parts(s);
  // Each part's route is the planner's: gated_delta_step (a decode step on a plugin with it: 4
  // launches with the projection, conv + l2 norm and out_proj) or its unfused form, whose
  // gating projects the normed rows itself, so the projection keeps them for it.
  bool keep_normed = false;
  for (const StepPart& part : parts)
    keep_normed = keep_normed || ops::gated_delta_step_reads_normed(be, part.step, dims);

  // [qkv (C) | z (value width) | a | b (v_heads each)]
  ops::norm_linear(be, T, in, in_proj_, /*gated=*/false, proj, {}, keep_normed);
  for (const StepPart& part : parts) {
    const int64_t r = part.first, n = part.step.tokens;
    const ops::Rows p = proj.from(r), x = conv.from(r);
    // q's heads and then k's lead the conv row: both are l2-normalised with it.
    // A verification pass (one part: it is never mixed) keeps the state after every token.
    const bool keep = part.step.keep_token_states;
    ops::conv_l2_norm(be, part.step, p, conv_w_, C, spec_.conv_kernel, conv_state_.as<float>(), x,
                      2 * spec_.k_heads, spec_.k_dim, kQkL2Eps, keep ? conv_token_states_.as<float>() : nullptr);
    const ops::Rows q = x, k = x.at(key_width()), v = x.at(2 * key_width()), z = p.at(C);
    const ops::Rows a = p.at(C + value_width()), b = a.at(spec_.v_heads);
    ops::GdnStepInputs step{q, k, v, z, a, b, &a_log_, &dt_bias_, &norm_w_, spec_.eps, scale};
    step.normed = in.normed.from(r);
    step.w_a = &w_a_;
    step.w_b = &w_b_;
    step.g = scratch.gates; // the part's own: consumed within its call
    step.beta = scratch.gates + n * spec_.v_heads;
    ops::gated_delta_step(be, part.step, step, dims, recurrent_state_.as<float>(), core.from(r),
                          keep ? recurrent_token_states_.as<float>() : nullptr);
  }
  ops::linear(be, T, core, out_, resid, /*accumulate=*/true);
}

} // namespace ninfer::models
