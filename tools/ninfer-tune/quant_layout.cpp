#include "quant_layout.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ninfer/checkpoint/expected_tensors.hpp"
#include "ninfer/checkpoint/quantized_tensors.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer::tools {
namespace {

int32_t code_dtype(QuantCodes c) {
  return c == QuantCodes::Int4 ? NINFER_DTYPE_INT4 : c == QuantCodes::Int8 ? NINFER_DTYPE_INT8 : NINFER_DTYPE_FP8_E4M3;
}

int32_t scale_dtype(DType d) {
  return d == DType::BF16 ? NINFER_DTYPE_BF16 : d == DType::F16 ? NINFER_DTYPE_F16 : NINFER_DTYPE_F32;
}

} // namespace

std::string QuantLayout::describe() const {
  return fmt::format("g{}, {} scales, {}{}", group_size, ninfer_dtype_name(scale_dtype),
                     zeros ? "zero points" : "symmetric", g_idx ? ", g_idx" : "");
}

std::map<QuantLayoutKey, QuantLayout> model_quant_layouts(const Checkpoint& ck) {
  std::map<QuantLayoutKey, QuantLayout> out;
  auto add = [&](int32_t dtype, const QuantLayout& l) {
    const auto [it, fresh] = out.try_emplace({dtype, l.g_idx ? 0 : l.group_size}, l);
    it->second.zeros = it->second.zeros || l.zeros;
  };
  for (const ExpectedTensor& e : expected_tensors(ck.config())) {
    if (const SyntheticQuant* q = ck.synthetic_quant(e.name)) {
      // Checkpoint::synthetic's matrices: symmetric, BF16 scales, no g_idx; a group no wider
      // than the row (models/synthetic_weights.cpp).
      add(code_dtype(q->codes), {NINFER_DTYPE_BF16, false, false, std::min(q->group_size, e.shape.back())});
    } else if (const auto m = find_quantized(ck, e.name)) {
      const QuantizedMatrix l = read_quantized(ck, *m, QuantRead::Layout);
      add(code_dtype(l.codes_type), {scale_dtype(l.scale_dtype), !l.zeros.empty(), !l.g_idx.empty(), l.group_size});
    }
  }
  return out;
}

QuantLayout quant_layout_for(const std::map<QuantLayoutKey, QuantLayout>& layouts, const std::string& op,
                             const ninfer_shape& shape) {
  if (op == "linear") {
    if (const auto it = layouts.find({shape.dtype, shape.dims[2]}); it != layouts.end()) return it->second;
  } else {
    for (const auto& [key, layout] : layouts)
      if (key.first == shape.dtype) return layout;
  }
  throw Error(fmt::format("{} {}x{} on {} weights{}: the model has no such quantized matrix", op, shape.dims[0],
                          shape.dims[1], ninfer_dtype_name(shape.dtype),
                          op == "linear" ? fmt::format(" (planning group {})", shape.dims[2]) : ""));
}

} // namespace ninfer::tools
