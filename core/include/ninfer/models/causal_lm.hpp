// A causal language model (Qwen3, Qwen3.5) loaded from a Hugging Face checkpoint and run
// through a Backend: sequence slots, prefill of prompts, batched decode, logits out.
//
//   Backend be(plugins, host_device());
//   auto ck = Checkpoint::open(dir);
//   auto lm = CausalLM::load(ck, be, {.max_context = 4096, .max_sequences = 4});
//   auto last = lm->prefill(0, prompt_ids);                 // [1, vocab]
//   auto rows = lm->decode(std::vector<int32_t>{0}, {next}); // [1, vocab]
//
// Everything is allocated at load (weights, KV cache per attention layer for max_context x
// max_sequences, GDN conv and recurrent state per slot, activations for the largest step, op
// workspace); prefill and decode never allocate device memory. Model code names op contracts
// only (ninfer/abi/ops/); the backend's planner picks the variants.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/checkpoint/model_config.hpp"

namespace ninfer {

class Backend;

// How weights are stored on the backend. Auto keeps F32 and BF16 tensors as they are in the
// checkpoint and widens F16 to F32 (no op takes F16). F32 widens everything (exact). BF16
// rounds F32/F16 matrices to bfloat16 (round to nearest even). Norm weights, conv weights,
// A_log, dt_bias and the small GDN gating matrices are always float32.
enum class WeightPrecision { Auto, F32, BF16 };

// Element type of the KV cache (ninfer/abi/ops/kv_append.h). Auto: float16 on a CUDA device whose
// plugin reads and writes it (the tensor-core prefill attention rounds K and V to fp16 anyway,
// and decode attention at long context is bound by the cache's bytes), float32 elsewhere (the
// CPU reference). F16 and BF16 halve the cache; a plugin that cannot take the asked dtype is an
// error at load. docs/manifest.md (`kv_dtype`) says when to choose which.
enum class KvCachePrecision { Auto, F32, F16, BF16 };
const char* to_string(KvCachePrecision p); // "auto", "float32", "float16", "bfloat16"

struct ModelOptions {
  int64_t max_context = 0;    // tokens one sequence may hold; 0: min(max_position_embeddings, 4096)
  int32_t max_sequences = 1;  // sequence slots (concurrent streams)
  int32_t prefill_chunk = 512; // most tokens of one forward pass; longer prompts go in chunks
  WeightPrecision weights = WeightPrecision::Auto;
  KvCachePrecision kv_cache = KvCachePrecision::Auto; // resolved by load: never Auto in options()
  // Decode steps replay CUDA graphs (one per batch size and context bucket) where the backend
  // can record them; off: every kernel is launched one by one (a diagnostic switch).
  bool cuda_graphs = true;
};

enum class LogitsFor { Last, All };

// One sequence's token choice on the backend (the sample op, ninfer/abi/ops/sample.h): the
// host sampler's temperature / top-k / top-p / min-p, and draw number `draw` of the stream
// `seed` (draw k of a sequence is the k-th random draw its Sampler would make).
struct RowSampling {
  double temperature = 1.0; // 0: greedy
  int32_t top_k = 0;        // 0: off
  double top_p = 1.0;       // 1: off
  double min_p = 0.0;       // 0: off
  uint64_t seed = 0;
  uint64_t draw = 0;
};

namespace models {
class Decoder; // core/models: the layers, activations and ops of one forward pass
enum class Pick; // core/models/decoder.hpp: the token choice a decode step runs with its layers
}

class CausalLM {
 public:
  // Checks every tensor against config.json first (one error lists all problems), then
  // uploads the weights and allocates all memory. Throws ninfer::Error on a problem.
  static std::unique_ptr<CausalLM> load(const Checkpoint& checkpoint, Backend& backend,
                                        const ModelOptions& options = {});
  ~CausalLM();
  CausalLM(const CausalLM&) = delete;
  CausalLM& operator=(const CausalLM&) = delete;

  const ModelConfig& config() const { return config_; }
  const ModelOptions& options() const { return options_; } // resolved (max_context filled in)
  int64_t vocab_size() const { return config_.vocab_size; }

  // Whether decode steps replay CUDA graphs now (options().cuda_graphs, unless a recording
  // failed and the model fell back to eager launches), and how many graphs it has recorded.
  bool decode_graphs_active() const;
  size_t decode_graphs_recorded() const;

  // Tokens slot `slot` holds (its next position).
  int64_t position(int32_t slot) const;
  // Forgets the slot's sequence: position 0, GDN state zeroed.
  void reset(int32_t slot);
  // Whether truncate() can roll a slot back: only a model without Gated DeltaNet layers, whose
  // whole state per token is its KV rows (a recurrent state cannot be rewound).
  bool can_truncate() const;
  // Keeps the first `tokens` of the slot's sequence (at most position()); the next prefill or
  // decode continues from there, overwriting the KV rows after it. Throws ninfer::Error when
  // !can_truncate() or `tokens` is beyond the slot's position.
  void truncate(int32_t slot, int64_t tokens);
  // Benchmarks only: the slot continues at position `tokens` as if that many had been
  // prefilled, without computing them. Decode then reads `tokens` KV rows per attention layer
  // (zeros, or what an earlier sequence left), so its cost is that of a real context that deep.
  void assume_context(int32_t slot, int64_t tokens);

  // Appends `ids` to the slot's sequence (in chunks of prefill_chunk) and returns logits
  // row-major: [ids.size(), vocab] for All, [1, vocab] (after the last id) for Last. Throws
  // ninfer::Error for an empty prompt, an id outside the vocabulary, a bad slot, or a prompt
  // that does not fit in max_context; the slot is then unchanged.
  std::vector<float> prefill(int32_t slot, std::span<const int32_t> ids, LogitsFor which = LogitsFor::Last);

  // One token for each of several sequences (distinct slots) in one forward pass; returns
  // [slots.size(), vocab]. Same errors as prefill.
  std::vector<float> decode(std::span<const int32_t> slots, std::span<const int32_t> ids);

  // decode() followed by greedy selection on the backend: returns the argmax id of each row
  // (ties: lowest id) and, in `logprobs`, its log-probability; no logits cross to the host.
  // An id of -1 means the row held a NaN.
  std::vector<int32_t> decode_greedy(std::span<const int32_t> slots, std::span<const int32_t> ids,
                                     std::vector<float>* logprobs = nullptr);

  // decode() followed by sampling on the backend, row i under params[i]: returns the chosen id
  // of each row and, in `logprobs`, its raw log-probability; no logits cross to the host. An
  // id of -1 means the row held a NaN or +inf (or only -inf).
  std::vector<int32_t> decode_sample(std::span<const int32_t> slots, std::span<const int32_t> ids,
                                     std::span<const RowSampling> params, std::vector<float>* logprobs = nullptr);

  // Decode steps queued ahead of the host, so the device never waits for the host between two
  // steps. queue_decode starts a step that picks on the backend (greedy with `params` empty,
  // else row i sampled under params[i]) and returns at once; with `ids` empty, its input ids are
  // the ones the previous queued step picked, which never visit the host (that step must have
  // had the same slots, in the same order). next_picks waits for the oldest queued step whose
  // picks were not read and returns them (an id of -1: a NaN row, as in decode_greedy). At most
  // two steps' picks are unread at once. A step queued after the token that ends a sequence still
  // runs and advances its slot (GDN state included): reset() the slot before reusing it.
  // decode_greedy and decode_sample are a queue_decode and its next_picks.
  void queue_decode(std::span<const int32_t> slots, std::span<const int32_t> ids,
                    std::span<const RowSampling> params = {});
  std::vector<int32_t> next_picks(std::vector<float>* logprobs = nullptr);
  // Forgets the picks not read yet (their steps still run).
  void drop_queued();

 private:
  CausalLM(ModelConfig config, ModelOptions options, Backend& backend, std::unique_ptr<models::Decoder> decoder);
  void check_slot(int32_t slot) const;
  // Validates and runs one decode forward pass (positions advance); the hidden rows stay on the
  // backend. `params`: the sampling rows of a Pick::Sample step. `chained`: the ids come from the
  // last pick (queue_decode), `ids` is not read.
  void decode_forward(std::span<const int32_t> slots, std::span<const int32_t> ids, std::span<const RowSampling> params,
                      models::Pick pick, bool chained);
  // queue_decode with the chaining explicit: decode_greedy and decode_sample never chain.
  void enqueue(std::span<const int32_t> slots, std::span<const int32_t> ids, std::span<const RowSampling> params,
               bool chained);
  void check_no_unread_picks(const char* call) const;
  void check_ids(std::span<const int32_t> ids) const;

  ModelConfig config_;
  ModelOptions options_;
  Backend& backend_;
  std::unique_ptr<models::Decoder> decoder_;
  std::vector<int64_t> positions_;
  std::vector<int32_t> last_queued_slots_; // the slots of the last queue_decode
};

} // namespace ninfer
