// Round-to-nearest (RTN) quantization of one weight matrix W[N, K] per group of `group`
// consecutive input channels of a row, on the grid of quant_grid.hpp: each group's scale (and
// zero point) from its own extremes, every weight rounded to the nearest code. Symmetric grids
// keep each group's extreme exact; every dequantized weight lies within half a step of w.
#pragma once

#include <cstdint>
#include <string>

#include "ninfer/quantize/quant_grid.hpp"
#include "ninfer/quantize/quantized_weights.hpp"

namespace ninfer {

// `w` is W[N, K] row-major in float32; `group` must divide K (kChannelGroup is resolved by the
// caller to K). Throws ninfer::Error naming `tensor` for a non-finite weight or a scale the
// scale dtype cannot hold (over 65504 in float16).
QuantizedWeights rtn_quantize(const float* w, int64_t rows, int64_t cols, int64_t group, const GridSpec& spec,
                              const std::string& tensor);

} // namespace ninfer
