// One decoder layer as every family and the MTP head hold it: input norm, token mixer
// (attention or Gated DeltaNet), post-attention norm, MLP.
#pragma once

#include <memory>

#include "block.hpp"
#include "mlp_block.hpp"
#include "weights.hpp"

namespace ninfer::models {

struct Layer {
  Vector input_norm;
  std::unique_ptr<Mixer> mixer;
  Vector post_norm;
  std::unique_ptr<MlpBlock> mlp;
};

} // namespace ninfer::models
