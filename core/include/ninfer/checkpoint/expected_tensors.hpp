// The one list of tensors a text model needs, derived from its config: names (with the
// config's weight prefix), shapes, and what each one is. The checkpoint checker, the model
// loaders and ninfer-make-checkpoint all use it, so they cannot disagree.
// Layouts are documented in docs/checkpoints.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/checkpoint/model_config.hpp"

namespace ninfer {

enum class TensorRole {
  Embedding,           // [vocab, hidden] token embedding (and the LM head when tied)
  Linear,              // [out, in] weight of y = x W^T (lm_head included)
  RmsNormWeight,       // y = x_hat * w          (Qwen3 norms; Qwen3.5 gated GDN norm), w ~ 1
  RmsNormOffsetWeight, // y = x_hat * (1 + w)    (Qwen3.5 norms), w ~ 0
  Conv1dWeight,        // [channels, 1, kernel] depthwise causal conv of a GDN layer
  ALog,                // [linear_num_value_heads] log of the GDN decay rate A
  DtBias,              // [linear_num_value_heads] bias added before softplus in the GDN gate
};

const char* tensor_role_name(TensorRole r);

struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
  TensorRole role;
  int64_t layer = -1;  // -1 for tensors outside the decoder layers
  std::string origin;  // how the shape follows from config.json, for error messages
};

// "model.layers.7." (or "model.language_model.layers.7.")
std::string layer_prefix(const ModelConfig& cfg, int64_t layer);

// Every tensor the text model reads, in a stable order: embedding, layers 0..N-1, final norm,
// lm_head (absent when tie_word_embeddings).
std::vector<ExpectedTensor> expected_tensors(const ModelConfig& cfg);

// The multi-token-prediction head's tensors (Qwen3.5's layout, at the checkpoint's top level
// whatever its weight prefix): mtp.fc [hidden, 2 x hidden], mtp.pre_fc_norm_embedding,
// mtp.pre_fc_norm_hidden, one full-attention decoder layer mtp.layers.0.* named as a model
// layer, mtp.norm; the embedding and LM head are the model's. Empty when config.json has no
// mtp_num_hidden_layers. Loaded only for speculative decoding (docs/speculative.md).
std::vector<ExpectedTensor> mtp_tensors(const ModelConfig& cfg);

// Checks one expected tensor (presence + shape) and returns it.
const TensorView& require(const Checkpoint& ck, const ExpectedTensor& e);

// Checks every expected tensor; one ninfer::Error lists all that are missing or misshapen
// (up to a dozen), so a broken checkpoint is diagnosed in one run.
void require_all(const Checkpoint& ck);

// The same for the MTP head: throws ninfer::Error when config.json has no MTP layer (naming the
// key), has more than one (Qwen3.5 ships one; its K drafts reuse it), or a tensor of it is
// missing or misshapen.
void require_mtp(const Checkpoint& ck);

// Tensors that are neither expected nor auxiliary (model.visual.*, mtp.*): a sign that the
// checkpoint carries something the model would silently ignore. Sorted.
std::vector<std::string> unrecognised_tensors(const Checkpoint& ck);

} // namespace ninfer
