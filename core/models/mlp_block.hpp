// The SiLU-gated MLP shared by Qwen3 and Qwen3.5: down(silu(gate(x)) * up(x)), with gate and
// up stacked into one matrix so they run as one linear.
#pragma once

#include <string>

#include "block.hpp"
#include "weights.hpp"

namespace ninfer::models {

class MlpBlock {
 public:
  // `prefix` is the layer's "model.layers.N." (with the checkpoint's weight prefix).
  MlpBlock(WeightLoader& w, const std::string& prefix, int64_t intermediate);
  ScratchNeeds needs() const { return {2 * intermediate_, intermediate_, 0, 0}; }
  void forward(Backend& be, const Step& s, const Scratch& scratch, const ops::NormedInput& in, ops::Rows resid);

 private:
  int64_t intermediate_;
  Projection gate_up_;
  Matrix down_;
};

} // namespace ninfer::models
