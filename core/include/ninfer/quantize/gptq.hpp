// GPTQ (Frantar et al., 2022): quantizes W[N, K] column by column and pushes each column's
// rounding error onto the columns not yet quantized, weighted by the inverse Hessian of the
// layer's reconstruction error ‖X Wᵀ − X Ŵᵀ‖², H = Σ x xᵀ over the calibration inputs x of the
// module. Every row is independent of the others; docs/ninfer-quantize.md ("GPTQ") states the
// steps:
//
//   1. dead columns: H_kk = 0 (no calibration input reached channel k) → W[:, k] = 0, H_kk = 1
//   2. order: k = 0..K−1, or (act order) by decreasing H_kk, ties by channel
//   3. dampening: H += λ I with λ = damp · mean(diag H)
//   4. U = the upper Cholesky factor of H⁻¹ (H⁻¹ = Uᵀ U), in processing order
//   5. for each position i in order: at a group's first position, the group's grid from the
//      row's current values of that group (quant_grid.hpp); q = the code of w_i;
//      e = (w_i − value(q)) / U_ii; w_j −= e · U_ij for every later position j
//
// Step 5 runs in blocks of kGptqBlock positions: inside a block the updates are applied at once,
// beyond it they wait for the block's end (one matrix product). Each w_j still takes the same
// terms in the same order, so the block size changes nothing; a block never ends inside a group
// that has started after its first position, so grids see fully updated values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ninfer/quantize/quant_grid.hpp"
#include "ninfer/quantize/quantized_weights.hpp"

namespace ninfer {

inline constexpr int64_t kGptqBlock = 128;

// What GPTQ needs from a Hessian, shared by every module that reads the same input (q, k and v;
// gate and up; a Gated DeltaNet layer's input projections).
struct GptqFactor {
  int64_t cols = 0;
  std::vector<int32_t> order; // position i quantizes input channel order[i]
  std::vector<uint8_t> dead;  // per input channel: no calibration input reached it
  std::vector<double> u;      // [K, K] row-major: U in processing order, upper triangle (the rest 0)
  double lambda = 0;          // the damping added to the diagonal
};

// Steps 1–4 on `hessian` (K x K, row-major, symmetric; consumed: its memory is reused). Throws
// ninfer::Error naming `what` for a Hessian that is not finite, or not positive definite even
// after damping (a larger damp fixes that).
GptqFactor gptq_factor(std::vector<double> hessian, int64_t k, double damp, bool actorder, const std::string& what);

// Step 5 for W[N, K] (row-major float32) in groups of `group` positions (dividing K). In act
// order the result's g_idx gives each input channel the group of its position. Throws
// ninfer::Error naming `tensor` for a non-finite weight or a scale the dtype cannot hold.
QuantizedWeights gptq_quantize(const float* w, int64_t rows, int64_t cols, int64_t group, const GridSpec& spec,
                               const GptqFactor& factor, const std::string& tensor, int64_t block = kGptqBlock);

} // namespace ninfer
