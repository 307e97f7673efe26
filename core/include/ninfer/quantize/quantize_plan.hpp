// What ninfer-quantize does with each tensor of a checkpoint under a recipe: which linear
// weights it quantizes (with what bits, group, grid and scale dtype) and which it copies
// unchanged, checked against the model before anything is written.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/quantize/quant_grid.hpp"
#include "ninfer/quantize/recipe.hpp"

namespace ninfer {

struct PlannedModule {
  std::string tensor;  // "model.layers.0.mlp.down_proj.weight"
  std::string module;  // "model.layers.0.mlp.down_proj"
  ModuleRole role;
  int64_t rows = 0;    // N (outputs)
  int64_t cols = 0;    // K (inputs)
  int bits = 4;
  int64_t group = 0;   // resolved: cols when the recipe asks for one scale per output channel
  bool channel = false; // the recipe asked for one scale per output channel
  bool symmetric = true;
  double damp = kDefaultDamp; // GPTQ's dampening
  DType scale_dtype = DType::BF16;
};

// The grid a planned module is quantized onto in `format` (GPTQ's checkpoint_format gptq stores
// zero − 1, so its asymmetric zero points start at 1).
GridSpec grid_spec(const PlannedModule& m, QuantFormat format);

struct QuantizePlan {
  QuantFormat format = QuantFormat::CompressedTensors;
  QuantizeMethod method = QuantizeMethod::Rtn;
  bool actorder = false;                    // GPTQ in act order: every module carries g_idx
  std::string weight_prefix;                // "model." or "model.language_model."
  std::vector<PlannedModule> quantized;     // in checkpoint name order
  std::vector<std::string> copied;          // every other tensor, unchanged
  // Linear modules left unquantized (their full names, without ".weight"): the roles the
  // recipe keeps, and the 2-D weights of the vision tower and the MTP head.
  std::vector<std::string> unquantized_linears;
  std::vector<ModuleRole> roles_present;    // roles the model has, in role order
  bool has_visual = false;                  // model.visual.* tensors present
  bool has_mtp = false;                     // mtp.* tensors present
};

// Checks the recipe against the checkpoint and returns the plan. Errors name the recipe (file
// and line where it has one), the tensor and the problem: a role the model does not have, a
// group size that does not divide a tensor's input channels, a shape the packing cannot hold.
QuantizePlan plan_quantization(const Checkpoint& ck, const Recipe& recipe);

} // namespace ninfer
