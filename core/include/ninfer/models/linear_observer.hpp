// The input rows of the model's linear projections, as the runtime computes them: what
// ninfer-quantize's GPTQ builds its Hessians from (docs/ninfer-quantize.md). While an
// ObservedLinears lives, every projection model code runs on its backend (CausalLM's prefill and
// queued steps, logits included: attention q|k|v and o, Gated DeltaNet qkv|z|a|b and out, MLP
// gate|up and down, lm_head) reports its input rows, keyed by the checkpoint modules that read
// them. Modules stacked into one matrix share their input and are reported together, once per
// call.
//
//   struct Grams : LinearObserver { ... };
//   Grams g;
//   ObservedLinears watch(backend, g);
//   lm->prefill(0, ids);   // g.observe(...) once per projection call
//
// On a GPU each report copies the rows to the host (the step waits for it). Recordings cannot
// copy to the host: a projection observed while the backend records is an error, which ends the
// recording (the decoder then launches its decode steps one by one). Prefill never records; load
// the model with ModelOptions::cuda_graphs off to observe decode steps without that detour.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace ninfer {

class Backend;

struct LinearInput {
  // Checkpoint module names ("model.layers.0.self_attn.q_proj", ..., "lm_head"): every module the
  // rows feed in this call.
  std::span<const std::string> modules;
  const float* rows = nullptr; // host memory, [tokens, cols] row-major, valid during the call
  int64_t tokens = 0;
  int64_t cols = 0; // the modules' input features
};

class LinearObserver {
 public:
  virtual ~LinearObserver() = default;
  // Whether this call's rows are wanted; false saves their copy.
  virtual bool wants(std::span<const std::string> modules) = 0;
  virtual void observe(const LinearInput& input) = 0;
};

// Installs `observer` for `backend` until destroyed. One observer per backend at a time (a
// second is an error); both must outlive this object.
class ObservedLinears {
 public:
  ObservedLinears(Backend& backend, LinearObserver& observer);
  ~ObservedLinears();
  ObservedLinears(const ObservedLinears&) = delete;
  ObservedLinears& operator=(const ObservedLinears&) = delete;

 private:
  Backend& backend_;
};

} // namespace ninfer
