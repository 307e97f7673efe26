// The forward pass shared by every family: embedding, decoder layers (norm, token mixer, norm,
// MLP; each block's norm is folded into its first projection and its last projection adds to
// the residual stream), final norm, LM head. Owns the activation
// buffers (sized once for StepLimits) and the step inputs.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "block.hpp"
#include "mlp_block.hpp"
#include "ninfer/abi/ops/sample.h"
#include "ninfer/checkpoint/model_config.hpp"
#include "step_inputs.hpp"
#include "weights.hpp"

namespace ninfer::models {

struct Layer {
  Vector input_norm;
  std::unique_ptr<Mixer> mixer;
  Vector post_norm;
  std::unique_ptr<MlpBlock> mlp;
};

// What a family supplies: its layers and top-level weights.
struct DecoderParts {
  Matrix embedding;
  std::vector<Layer> layers;
  Vector final_norm;
  Matrix lm_head;            // empty when tied to the embedding
  ops::NormScale norm_scale; // of the layer and final norms
  float eps = 1e-6f;
};

class Decoder {
 public:
  // Allocates activations for `limits`, then sizes every op's workspace by planning the largest
  // prefill and decode steps.
  Decoder(Backend& be, DecoderParts parts, const StepLimits& limits);

  const StepLimits& limits() const { return limits_; }
  int64_t vocab() const { return lm_head().rows; }

  // Uploads the step, runs every layer and the final norm; the hidden rows stay on the backend.
  // A decode step (one token per sequence) plans attention for its context bucket and, with
  // recording on, replays the recording of its (sequences, bucket) instead of launching op by op.
  Step forward(std::span<const SequenceChunk> chunks);
  // Decode steps replay recordings (CUDA graphs) when `on` and the backend can record.
  void set_decode_recording(bool on) { record_decode_ = on && be_.can_record(); }
  bool decode_recording() const { return record_decode_; }
  size_t decode_recordings() const;
  // Logits of rows [first, first + count) of the last forward pass, appended to `out`.
  void logits(int64_t first, int64_t count, std::vector<float>& out);
  // The greedy token and its log-probability for rows [first, first + count), chosen on the
  // backend: only ids and log-probabilities cross to the host.
  void greedy(int64_t first, int64_t count, std::vector<int32_t>& ids, std::vector<float>& logprobs);
  // A token drawn for rows [first, first + count) under params[i] (sample op), chosen on the
  // backend: only the small params go up and ids and log-probabilities come back.
  void sample(int64_t first, std::span<const ninfer_sample_row> params, std::vector<int32_t>& ids,
              std::vector<float>& logprobs);

  void reset(int32_t slot);

 private:
  void download_picks(int64_t n, int32_t* ids, float* logprobs);
  const Matrix& lm_head() const { return parts_.lm_head.buf.empty() ? parts_.embedding : parts_.lm_head; }
  void run_layers(const Step& s);
  void reserve_workspace();
  // The span a decode step's attention is planned for: the next power of two >= kv_len (at
  // least kMinDecodeBucket, at most max_context). Eager and recorded steps use the same plans,
  // so they compute the same bits, and one recording serves every length in its bucket.
  int32_t decode_bucket(int32_t kv_len) const;
  void run_decode_step(const Step& s);

  Backend& be_;
  DecoderParts parts_;
  StepLimits limits_;
  StepInputs inputs_;
  ScratchNeeds needs_;
  int64_t hidden_;
  int64_t logit_rows_; // rows of the logits buffer; the LM head runs in slices of this many
  DeviceBuffer residual_, normed_, proj_, inner_, core_, gates_, logits_;
  // Per slice of n rows: n token ids, then n log-probabilities (download_picks).
  DeviceBuffer picks_;
  std::vector<int32_t> picks_host_;
  DeviceBuffer sample_params_;                 // logit_rows_ ninfer_sample_row
  Scratch scratch_;
  bool record_decode_ = false;
  // Decode shapes seen: null until the shape's second step records it.
  std::map<std::pair<int64_t, int32_t>, std::shared_ptr<const Backend::Recording>> recordings_;
};

} // namespace ninfer::models
