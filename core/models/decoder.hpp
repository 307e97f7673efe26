// The forward pass shared by every family: embedding, decoder layers (norm, token mixer, norm,
// MLP; each block's norm is folded into its first projection and its last projection adds to
// the residual stream), final norm, LM head. Owns the activation
// buffers (sized once for StepLimits) and the step inputs.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
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

// The token choice a decode step makes for its rows right after its layers, in the same launch
// sequence (one recording with them; the copy of the ids to the host follows it): Greedy is the
// argmax op, Sample the sample op under the rows set by set_sample_rows.
enum class Pick { None, Greedy, Sample };

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
  // recording on, replays the recording of its DecodeShape instead of launching op by op.
  // With `pick`, the step's rows are also chosen (all of them) and their ids and
  // log-probabilities start back to the host without the host waiting: read_picks returns them,
  // oldest first. At most kMostPendingPicks picks are unread at once. With `ids_from_picks`, the
  // step's input ids are the ids of the last pick, copied on the backend (the chunks' ids are
  // placeholders): so a step can be queued before the host has read the pick that feeds it.
  static constexpr size_t kMostPendingPicks = MemorySpace::kResultSlots;
  Step forward(std::span<const SequenceChunk> chunks, Pick pick = Pick::None, bool ids_from_picks = false);
  // The sampling rows the next Pick::Sample step uses, row i for the step's row i.
  void set_sample_rows(std::span<const ninfer_sample_row> rows);
  size_t pending_picks() const { return pending_.size(); }
  // Waits for the oldest unread pick and appends its ids and log-probabilities.
  void read_picks(std::vector<int32_t>& ids, std::vector<float>& logprobs);
  // Forgets the unread picks (their steps still run).
  void drop_picks() { pending_.clear(); }
  // Decode steps replay recordings (CUDA graphs) when `on` and the backend can record.
  void set_decode_recording(bool on) { record_decode_ = on && be_.can_record(); }
  bool decode_recording() const { return record_decode_; }
  size_t decode_recordings() const;
  // Logits of rows [first, first + count) of the last forward pass, appended to `out`.
  void logits(int64_t first, int64_t count, std::vector<float>& out);
  void reset(int32_t slot);

 private:
  // The LM head, then `pick` for rows [first, first + n) into picks_.
  void run_pick(int64_t first, int64_t n, Pick pick);
  // Starts picks_ (n rows) back to the host, into the next result slot.
  void send_picks(int64_t n);
  const Matrix& lm_head() const { return parts_.lm_head.buf.empty() ? parts_.embedding : parts_.lm_head; }
  void run_layers(const Step& s);
  void reserve_workspace();
  // The span a decode step's attention is planned for: the next power of two >= kv_len (at
  // least kMinDecodeBucket, at most max_context). Eager and recorded steps use the same plans,
  // so they compute the same bits, and one recording serves every length in its bucket.
  int32_t decode_bucket(int32_t kv_len) const;
  // What a decode step's recording depends on: (sequences, context bucket, pick, ids from the
  // last pick).
  using DecodeShape = std::tuple<int64_t, int32_t, Pick, bool>;
  void run_decode_step(const DecodeShape& shape, const std::function<void()>& launch);

  Backend& be_;
  DecoderParts parts_;
  StepLimits limits_;
  StepInputs inputs_;
  ScratchNeeds needs_;
  int64_t hidden_;
  int64_t logit_rows_; // rows of the logits buffer; the LM head runs in slices of this many
  DeviceBuffer residual_, normed_, proj_, inner_, core_, gates_, logits_;
  // Per pick of n rows: n token ids, then n log-probabilities (run_pick).
  DeviceBuffer picks_;
  struct PendingPick {
    size_t slot; // the backend's result slot
    int64_t rows;
  };
  std::deque<PendingPick> pending_;
  size_t next_result_slot_ = 0;
  int64_t last_pick_rows_ = 0; // rows picks_ holds ids for (0: none yet)
  DeviceBuffer sample_params_;                 // logit_rows_ ninfer_sample_row
  Scratch scratch_;
  bool record_decode_ = false;
  // Decode shapes seen: null until the shape's second step records it.
  std::map<DecodeShape, std::shared_ptr<const Backend::Recording>> recordings_;
};

} // namespace ninfer::models
