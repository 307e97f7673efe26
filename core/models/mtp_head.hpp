// Qwen3.5's multi-token-prediction head (mtp.*), the drafter of speculative decoding
// (docs/speculative.md):
//   x   = fc(cat[rmsnorm_e(embed(tok)), rmsnorm_h(h)])   fc [H, 2H]; the model's embedding table
//   x   = one decoder layer: full attention (its own KV cache) and MLP
//   out = rmsnorm(x)                                      mtp.norm; the model's LM head gives logits
// A row pairs token tok[p+1] with the hidden state h of position p and predicts tok[p+2]; it
// sits at position p (rotary angle and KV row), as the head was trained
// (tools/train-demo/model.py, MTP). h is the model's final-norm hidden state at p for the first
// draft, and the head's own `out` of the previous draft for the next ones.
#pragma once

#include <memory>

#include "block.hpp"
#include "decoder_layer.hpp"
#include "ninfer/checkpoint/model_config.hpp"
#include "weights.hpp"

namespace ninfer::models {

class MtpHead {
 public:
  // Loads mtp.* (the checkpoint must have passed require_mtp) and allocates the head's
  // activations for limits.max_tokens rows and its layer's KV cache for limits.max_sequences
  // slots x limits.max_context positions.
  MtpHead(WeightLoader& w, Backend& be, const ModelConfig& cfg, const StepLimits& limits);

  ScratchNeeds needs() const;
  // The head over the step's rows: token ids s.ids, hidden rows `hidden` (s.tokens rows of H),
  // its output rows into `out`, which may be `hidden` itself (read before it is written).
  // `embedding` is the model's table; `scratch` the decoder's block scratch.
  void forward(Backend& be, const Step& s, const Matrix& embedding, ops::Rows hidden, const Scratch& scratch,
               ops::Rows out);
  // The head's KV rows of block `from` into block `to` (its attention layer's, as the model's).
  void copy_kv_block(Backend& be, int32_t from, int32_t to) { layer_.mixer->copy_kv_block(be, from, to); }

 private:
  int64_t hidden_;
  ops::NormScale scale_;
  float eps_;
  Matrix fc_;
  Vector norm_embedding_, norm_hidden_, final_norm_;
  Layer layer_;
  DeviceBuffer cat_, residual_, normed_; // [max_tokens, 2H], [max_tokens, H], [max_tokens, H]
};

} // namespace ninfer::models
