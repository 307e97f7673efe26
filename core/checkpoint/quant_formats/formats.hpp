// One reader per published layout: find_* checks a module's packed tensors (dtypes and the
// shapes the packing implies) and fills in the matrix they hold; read_* repacks them into the
// canonical layout. quantized_tensors.cpp picks the reader by the config's quant_method.
#pragma once

#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/checkpoint/quantization_config.hpp"
#include "ninfer/checkpoint/quantized_tensors.hpp"

namespace ninfer::quant_detail {

// `m` comes with module, method, scheme and the names of its tensors present; these fill in
// codes, rows, cols, group_size and file.
void find_gptq(const Checkpoint& ck, QuantizedModule& m);
void find_awq(const Checkpoint& ck, QuantizedModule& m);
void find_compressed_tensors(const Checkpoint& ck, QuantizedModule& m);
void find_fp8_block(const Checkpoint& ck, QuantizedModule& m);

// QuantRead::Layout skips the codes and the scales (quantized_tensors.hpp).
QuantizedMatrix read_gptq(const Checkpoint& ck, const QuantizedModule& m, const QuantizationConfig& c, QuantRead what);
QuantizedMatrix read_awq(const Checkpoint& ck, const QuantizedModule& m, QuantRead what);
QuantizedMatrix read_compressed_tensors(const Checkpoint& ck, const QuantizedModule& m, QuantRead what);
QuantizedMatrix read_fp8_block(const Checkpoint& ck, const QuantizedModule& m, QuantRead what);

} // namespace ninfer::quant_detail
