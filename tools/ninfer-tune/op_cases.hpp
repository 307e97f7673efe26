// The inputs of one tunable op at one shape, on the device being tuned: random data made there
// (fill_random; a quantized matrix's small scale, zero-point and g_idx arrays made on the host),
// several copies of the weights so that timed launches stream them from memory
// rather than from L2, and a check of any variant's output rows against the CPU reference
// plugin on the same data.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ninfer/runtime/backend.hpp"
#include "quant_layout.hpp"

namespace ninfer::tools {

class OpCase {
 public:
  virtual ~OpCase() = default;
  virtual std::string op() const = 0;
  virtual ninfer_shape shape(int64_t tokens) const = 0;
  // The op's argument struct for `tokens` rows reading weight copy `copy` (see copies()).
  virtual const void* args(int64_t tokens, int copy) = 0;
  int copies() const { return copies_; }
  // Relative L2 distance of the last run's output rows {0, tokens/2, tokens-1} from the CPU
  // reference plugin's on the same inputs (the worst row).
  virtual double error_vs_reference(Backend& cpu, int64_t tokens) = 0;
  // The tolerance error_vs_reference must meet: variants may round activations to bf16 (and
  // cublaslt_dequant a quantized W's dequantized values too, about 2^-9 relative each, far
  // inside it), while a variant that reads a quantized layout wrong (a zero point, a scale, a
  // group) is off by tens of percent.
  static constexpr double kTolerance = 2e-2;

 protected:
  int copies_ = 1;
};

// Supported: linear (dims in_features, out_features, group), norm_linear (in_features,
// out_features, gated) and gdn_gating (hidden, heads). Returns null for other ops. `quant`: the
// model's layout of the weights when shape.dtype is a quantized dtype (linear and norm_linear),
// else nullopt. `l2_bytes`: the device's L2 (weights are copied until 3x that is in play).
std::unique_ptr<OpCase> make_op_case(Backend& be, const ninfer_shape& shape, const std::optional<QuantLayout>& quant,
                                     const std::string& op, int64_t max_tokens, int64_t l2_bytes, uint64_t seed);

} // namespace ninfer::tools
