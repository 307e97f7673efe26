// The packed tensors of a quantized projection, found per module and repacked into ninfer's one
// canonical layout (ninfer/abi/ops/quant_weight.h; docs/quantization.md) on the host:
//   codes  [N, K] row-major, int4 two per byte along K (even k in the low nibble), int8 / fp8
//          one byte; integer codes unsigned in [0, 2^bits)
//   scales [N, G], G = ceil(K / group_size), in the checkpoint's own scale dtype
//   zeros  [N, G] uint8, or none (symmetric: 2^(bits - 1))
//   g_idx  [K] int32, or none (g(k) = k / group_size)
// A module is quantized when its packed tensors are present (GPTQ / AWQ qweight,
// compressed-tensors weight_packed, an F8_E4M3 weight); without them it is a plain one whatever
// the config's lists say. Every problem is an ninfer::Error naming the file, the tensor (or
// module) and what is wrong.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/checkpoint/quantization_config.hpp"

namespace ninfer {

const char* quant_codes_name(QuantCodes c); // "int4", "int8", "fp8_e4m3"

// A quantized module as the checkpoint holds it: its format, scheme and packed tensors, and the
// [rows, cols] = [N, K] matrix they hold. No bulk data is read to find it.
struct QuantizedModule {
  std::string module;               // "model.layers.0.mlp.gate_proj"
  QuantMethod method = QuantMethod::Gptq;
  QuantScheme scheme;
  QuantCodes codes = QuantCodes::Int4;
  int64_t rows = 0, cols = 0;       // N outputs, K inputs
  int64_t group_size = 0;           // of the canonical layout (per-channel: K)
  std::vector<std::string> tensors; // its packed tensors' names
  std::filesystem::path file;       // where its main packed tensor is, for messages
};

// The quantized form of the weight `weight_name` ("<module>.weight"), or nullopt for a plain
// module. Checks the config (a module with packed tensors the config leaves unquantized, or a
// checkpoint without quantization_config, is an error naming the module), dtypes and the shapes
// the packing implies.
std::optional<QuantizedModule> find_quantized(const Checkpoint& ck, const std::string& weight_name);

// A quantized matrix in the canonical layout, on the host.
struct QuantizedMatrix {
  QuantizedModule source;
  QuantCodes codes_type = QuantCodes::Int4;
  int64_t rows = 0, cols = 0, group_size = 0;
  DType scale_dtype = DType::F16;    // F32, BF16 or F16
  std::vector<uint8_t> codes;        // rows * row_bytes()
  std::vector<uint8_t> scales;       // rows * groups() elements of scale_dtype, little-endian
  std::vector<uint8_t> zeros;        // rows * groups(), or empty: symmetric
  std::vector<int32_t> g_idx;        // cols, or empty: k / group_size

  int64_t groups() const { return (cols + group_size - 1) / group_size; }
  int64_t row_bytes() const { return codes_type == QuantCodes::Int4 ? (cols + 1) / 2 : cols; }
  int32_t bits() const { return codes_type == QuantCodes::Int4 ? 4 : 8; }
  // "gptq int4 g128" (for load messages and the memory budget).
  std::string label() const;
  // The dequantized weight W[n, k] (quant_weight.h), as float32 [rows, cols].
  std::vector<float> dequantize() const;
};

// What read_quantized reads: everything, or the layout only: the scale dtype, the zero points
// and g_idx (after dropping the trivial ones), with codes and scales left empty. The layout
// sizes the matrix on the device (a dry run of the load, ninfer/models/memory_plan.hpp) at
// the cost of reading the small tensors only.
enum class QuantRead { Values, Layout };

// Reads module `m`'s packed tensors and repacks them (the host's memory holds one matrix's
// worth at a time).
QuantizedMatrix read_quantized(const Checkpoint& ck, const QuantizedModule& m, QuantRead what = QuantRead::Values);

} // namespace ninfer
