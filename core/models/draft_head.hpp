// The drafter's own LM head rows (Speculation::draft_head, docs/speculative.md): the model's LM
// head rows [0, rows) quantized at load to int4, symmetric, in groups of 128 columns (one group
// per row where 128 does not divide them), round to nearest, in the canonical layout of
// ninfer/abi/ops/quant_weight.h: each group's step is its largest magnitude over 7, rounded up to a
// bfloat16. Every draft pass reads them instead of the 16-bit rows.
#pragma once

#include <cstdint>

#include "weights.hpp"

namespace ninfer::models {

// The rows are read back from the backend, quantized on the host and uploaded as weights (a dry
// run allocates the same bytes and reads nothing). The LM head must be float32 or bfloat16.
Matrix int4_draft_rows(Backend& be, const Matrix& lm_head, int64_t rows);

} // namespace ninfer::models
